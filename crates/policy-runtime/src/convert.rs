//! Conversions between the JSON model (`radwasm-policy-model`) and the WIT
//! bindings of each contract version the host loads. The mapping itself is
//! written once, in `radwasm_policy_model::wit_conversions!`, which the guest
//! SDK uses too.

/// Contract 0.6 (current): observations carry the namespace's metadata.
pub mod v0_6 {
    use super::super::bindings::v0_6::exports::radapp::policy::metadata;
    use super::super::bindings::v0_6::radapp::policy::{
        resource_types as rp, template_types as tp, types as wit,
    };

    radwasm_policy_model::wit_conversions!(v0_6; types = wit, metadata = metadata, template = tp, resource = rp);

    /// A resource plan shown to a layer as its base (every resource action
    /// exists in this version).
    pub fn resource_base_to_wit(
        plan: radwasm_policy_model::ResourcePlan,
    ) -> Result<rp::ResourcePlan, String> {
        Ok(resource_plan_to_wit(plan))
    }
}

/// Contract 0.5: policies and layers; layers may detach.
pub mod v0_5 {
    use super::super::bindings::v0_5::exports::radapp::policy::metadata;
    use super::super::bindings::v0_5::radapp::policy::{
        resource_types as rp, template_types as tp, types as wit,
    };

    radwasm_policy_model::wit_conversions!(v0_5; types = wit, metadata = metadata, template = tp, resource = rp);

    /// A resource plan shown to a layer as its base (every resource action
    /// exists in this version).
    pub fn resource_base_to_wit(
        plan: radwasm_policy_model::ResourcePlan,
    ) -> Result<rp::ResourcePlan, String> {
        Ok(resource_plan_to_wit(plan))
    }
}

/// Contract 0.4: policies and layers.
pub mod v0_4 {
    use super::super::bindings::v0_4::exports::radapp::policy::metadata;
    use super::super::bindings::v0_4::radapp::policy::{
        resource_types as rp, template_types as tp, types as wit,
    };

    radwasm_policy_model::wit_conversions!(v0_4; types = wit, metadata = metadata, template = tp, resource = rp);

    /// A resource plan shown to a layer as its base (every resource action
    /// exists in this version).
    pub fn resource_base_to_wit(
        plan: radwasm_policy_model::ResourcePlan,
    ) -> Result<rp::ResourcePlan, String> {
        Ok(resource_plan_to_wit(plan))
    }
}

/// Contract 0.3: what a host needs to drive a guest built against it.
pub mod v0_3 {
    use super::super::bindings::v0_3::exports::radapp::policy::{
        metadata, resource_policy as rp, template_policy as tp,
    };
    use super::super::bindings::v0_3::radapp::policy::types as wit;

    radwasm_policy_model::wit_conversions!(v0_3; types = wit, metadata = metadata, template = tp, resource = rp);
}

/// Contract 0.2: what a host needs to drive a guest built against it.
pub mod v0_2 {
    use super::super::bindings::v0_2::exports::radapp::policy::{
        metadata, resource_policy as rp, template_policy as tp,
    };
    use super::super::bindings::v0_2::radapp::policy::types as wit;

    radwasm_policy_model::wit_conversions!(v0_2; types = wit, metadata = metadata, template = tp, resource = rp);
}

/// Contract 0.1: what a host needs to drive a guest built against it.
pub mod v0_1 {
    use super::super::bindings::v0_1::exports::radapp::policy::{
        metadata, resource_policy as rp, template_policy as tp,
    };
    use super::super::bindings::v0_1::radapp::policy::types as wit;

    radwasm_policy_model::wit_conversions!(v0_1; types = wit, metadata = metadata, template = tp, resource = rp);
}

#[cfg(test)]
mod tests {
    use radwasm_policy_model as model;

    fn full_observation() -> model::TemplateObservation {
        model::TemplateObservation {
            meta: model::ObjectMeta {
                name: "app".into(),
                namespace: "ns".into(),
                uid: "u".into(),
                generation: 3,
                deletion_requested: true,
                finalizers: vec!["f".into()],
                labels: [("l".to_string(), "1".to_string())].into(),
                annotations: [("a".to_string(), "2".to_string())].into(),
            },
            spec: model::TemplateSpec {
                template: "{}".into(),
                parameters: "{}".into(),
                provider_config: "{}".into(),
            },
            spec_hash: "h".into(),
            status: model::TemplateStatus {
                phase: Some(model::TemplatePhase::ReadyPendingCleanup),
                message: "m".into(),
                observed_generation: 2,
                status_hash: Some("old".into()),
                output_resources: vec!["id".into()],
                conditions: vec![model::Condition {
                    kind: "Ready".into(),
                    status: model::ConditionStatus::Unknown,
                    reason: "R".into(),
                    message: "M".into(),
                }],
            },
            owned_resources: vec![model::OwnedResource {
                name: "o".into(),
                radius_id: "id".into(),
                deletion_requested: true,
                phase: "Missing".into(),
                missing_age_ms: Some(60_000),
            }],
            operation: Some(model::OperationObservation {
                kind: model::OperationKind::Deployment,
                subject: "h".into(),
                result: model::OperationResult::Refused(model::RadiusError {
                    code: "BadRequest".into(),
                    message: "no".into(),
                }),
            }),
            dependencies: vec![model::Dependency {
                name: "db".into(),
                exists: true,
                phase: Some(model::TemplatePhase::Held),
            }],
            last_failure: Some(model::FailureRecord {
                subject: "h".into(),
                count: 2,
                age_ms: 1234,
                error: model::RadiusError {
                    code: "C".into(),
                    message: "M".into(),
                },
            }),
            dependency_cycle: vec!["app".into(), "db".into(), "app".into()],
            deployments: vec!["d1".into(), "d2".into()],
            deployed_age_ms: Some(120_000),
            namespace: model::NamespaceMeta {
                labels: [("env".to_string(), "prod".to_string())].into(),
                annotations: [("owner".to_string(), "team-a".to_string())].into(),
            },
        }
    }

    fn full_resource_observation() -> model::ResourceObservation {
        let template = full_observation();
        model::ResourceObservation {
            meta: template.meta,
            radius_id: "id".into(),
            status: model::ResourceStatus {
                phase: Some(model::ResourcePhase::Missing),
                message: "id is missing in Radius".into(),
                conditions: template.status.conditions,
            },
            owner: Some(model::OwnerTemplate {
                name: "app".into(),
                reference_uid: "u".into(),
                found_uid: Some("u".into()),
                deletion_requested: false,
                annotations: [("a".to_string(), "2".to_string())].into(),
                provider_config: "{}".into(),
            }),
            operation: template.operation,
            last_failure: template.last_failure,
            missing_age_ms: Some(60_000),
            namespace: template.namespace,
        }
    }

    #[test]
    fn every_field_survives_the_round_trip_through_the_current_contract() {
        // The guest SDK converts back with the same macro: a field the macro
        // forgot in either direction shows up here.
        use super::super::bindings::v0_6::radapp::policy::template_types as tp;
        let observation = full_observation();
        let wit: tp::TemplateObservation =
            super::v0_6::template_observation_to_wit(observation.clone());
        assert_eq!(wit.namespace.labels[0].key, "env");
        let back = super::v0_6::template_observation_from_wit(wit);
        assert_eq!(back, observation);

        let observation = full_resource_observation();
        let back = super::v0_6::resource_observation_from_wit(
            super::v0_6::resource_observation_to_wit(observation.clone()),
        );
        assert_eq!(back, observation);

        let plan = model::TemplatePlan {
            actions: vec![
                model::TemplateAction::DeleteDeployment("d1".into()),
                model::TemplateAction::RequeueAfter(5),
            ],
        };
        let back = super::v0_4::template_plan_from_wit(
            super::v0_4::template_plan_to_wit(plan.clone()).expect("0.4 has these actions"),
        );
        assert_eq!(back, plan);

        let plan = model::ResourcePlan {
            actions: vec![model::ResourceAction::SetStatus(
                model::ResourceStatusUpdate {
                    phase: Some(model::ResourcePhase::Missing),
                    message: Some("gone".into()),
                    conditions: Vec::new(),
                    clear_operation: false,
                },
            )],
        };
        let back =
            super::v0_4::resource_plan_from_wit(super::v0_4::resource_plan_to_wit(plan.clone()));
        assert_eq!(back, plan);
    }

    #[test]
    fn a_contract_0_5_guest_sees_everything_but_the_namespace() {
        // 0.5 has no field for it: read back, the namespace is empty and
        // every other field is as it was.
        let mut observation = full_observation();
        let back = super::v0_5::template_observation_from_wit(
            super::v0_5::template_observation_to_wit(observation.clone()),
        );
        observation.namespace = model::NamespaceMeta::default();
        assert_eq!(back, observation);

        let mut observation = full_resource_observation();
        let back = super::v0_5::resource_observation_from_wit(
            super::v0_5::resource_observation_to_wit(observation.clone()),
        );
        observation.namespace = model::NamespaceMeta::default();
        assert_eq!(back, observation);
    }

    #[test]
    fn a_contract_0_2_guest_sees_a_missing_resource_as_failed_and_no_new_fields() {
        use super::super::bindings::v0_2::exports::radapp::policy::resource_policy as rp;
        use super::super::bindings::v0_2::radapp::policy::types as wit;
        let converted = super::v0_2::template_observation_to_wit(full_observation());
        assert_eq!(converted.owned_resources[0].phase, "Failed");
        assert!(
            matches!(
                converted.operation.expect("operation").result,
                wit::OperationResult::Refused(ref e) if e.code == "BadRequest"
            ),
            "0.2 knows refusals"
        );
        assert_eq!(converted.deployments, vec!["d1", "d2"]);

        let converted = super::v0_2::resource_observation_to_wit(full_resource_observation());
        assert_eq!(converted.status.phase, Some(rp::ResourcePhase::Failed));
        assert_eq!(converted.status.message, "id is missing in Radius");
        assert!(converted.last_failure.is_some());
    }

    #[test]
    fn a_contract_0_1_guest_sees_a_refusal_as_a_failed_operation_and_no_new_fields() {
        use super::super::bindings::v0_1::radapp::policy::types as wit;
        let converted = super::v0_1::template_observation_to_wit(full_observation());
        let operation = converted.operation.expect("operation");
        assert!(
            matches!(operation.result, wit::OperationResult::Failed(ref e) if e.code == "BadRequest"),
            "{:?}",
            operation.result
        );
        assert_eq!(converted.spec_hash, "h");
        assert_eq!(converted.owned_resources[0].phase, "Failed");

        use super::super::bindings::v0_1::exports::radapp::policy::resource_policy as rp;
        let converted = super::v0_1::resource_observation_to_wit(full_resource_observation());
        assert_eq!(converted.status.phase, Some(rp::ResourcePhase::Failed));
    }
}
