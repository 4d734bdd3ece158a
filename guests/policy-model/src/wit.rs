//! The one description of how the model maps onto the WIT bindings.
//!
//! The host (wasmtime `bindgen!`) and the guest SDK (`wit_bindgen::generate!`)
//! each generate their own Rust types from `wit/policy.wit`, but the mapping
//! between those types and this crate's model is the same on both sides.
//! [`wit_conversions!`](crate::wit_conversions) writes it once: invoked in a
//! module where the generated interfaces are in scope under short names, it
//! defines plain conversion functions in that module, for contract version
//! `v0_6` (current), `v0_5`, `v0_4` or `v0_3` (both directions) or `v0_2` / `v0_1` (what a host needs
//! to drive a guest built against an older contract: observations to WIT,
//! plans from WIT).
//!
//! ```ignore
//! use crate::bindings::exports::radapp::policy::metadata;
//! use crate::bindings::radapp::policy::{resource_types as rp, template_types as tp, types as wit};
//! radwasm_policy_model::wit_conversions!(v0_6; types = wit, metadata = metadata, template = tp, resource = rp);
//! ```
//!
//! Fields a version lacks are dropped going to WIT, and left empty coming
//! from it (a 0.5 observation read back has no namespace metadata). A refused request is
//! shown to a 0.1 guest as a failed operation, which is what 0.1 hosts told
//! it. A resource in the `Missing` phase (0.3) is shown to a 0.1 or 0.2
//! guest as `failed`, in a resource's status and in the text of an owned
//! resource's phase alike: the older phase that says something is wrong and
//! `status.message` says what (`none` would claim it never had a status).

/// Define model ⇄ WIT conversion functions in the calling module. See the
/// module documentation of `radwasm_policy_model::wit`.
#[macro_export]
macro_rules! wit_conversions {
    // 0.6 added the namespace's metadata to both observations; its plans
    // are 0.5's.
    (v0_6; types = $wit:ident, metadata = $md:ident, template = $tp:ident, resource = $rp:ident) => {
        $crate::wit_conversions!(@common $wit, $md, $tp, $rp);
        $crate::wit_conversions!(@observations_to_wit $wit, $md, $tp, $rp, v0_6);
        $crate::wit_conversions!(@plans_to_wit $wit, $md, $tp, $rp, v0_6);
        $crate::wit_conversions!(@observations_from_wit $wit, $md, $tp, $rp, v0_6);
        $crate::wit_conversions!(@plans_from_wit $wit, $md, $tp, $rp, v0_6);
        $crate::wit_conversions!(@meta_from_wit $wit, $md, $tp, $rp);
    };
    // 0.5 added one template action (`detach-resource`); the rest is 0.3's.
    (v0_5; types = $wit:ident, metadata = $md:ident, template = $tp:ident, resource = $rp:ident) => {
        $crate::wit_conversions!(@common $wit, $md, $tp, $rp);
        $crate::wit_conversions!(@observations_to_wit $wit, $md, $tp, $rp, v0_3);
        $crate::wit_conversions!(@plans_to_wit $wit, $md, $tp, $rp, v0_5);
        $crate::wit_conversions!(@observations_from_wit $wit, $md, $tp, $rp, v0_3);
        $crate::wit_conversions!(@plans_from_wit $wit, $md, $tp, $rp, v0_5);
        $crate::wit_conversions!(@meta_from_wit $wit, $md, $tp, $rp);
    };
    // 0.4 moved each kind's records, unchanged, into type-only interfaces
    // (`template-types`, `resource-types`): the mapping is 0.3's.
    (v0_4; types = $wit:ident, metadata = $md:ident, template = $tp:ident, resource = $rp:ident) => {
        $crate::wit_conversions!(v0_3; types = $wit, metadata = $md, template = $tp, resource = $rp);
    };
    (v0_3; types = $wit:ident, metadata = $md:ident, template = $tp:ident, resource = $rp:ident) => {
        $crate::wit_conversions!(@common $wit, $md, $tp, $rp);
        $crate::wit_conversions!(@to_wit $wit, $md, $tp, $rp, v0_3);
        $crate::wit_conversions!(@from_wit $wit, $md, $tp, $rp, v0_3);
    };
    (v0_2; types = $wit:ident, metadata = $md:ident, template = $tp:ident, resource = $rp:ident) => {
        $crate::wit_conversions!(@common $wit, $md, $tp, $rp);
        $crate::wit_conversions!(@observations_to_wit $wit, $md, $tp, $rp, v0_2);
        $crate::wit_conversions!(@plans_from_wit $wit, $md, $tp, $rp, v0_2);
        $crate::wit_conversions!(@meta_from_wit $wit, $md, $tp, $rp);
    };
    (v0_1; types = $wit:ident, metadata = $md:ident, template = $tp:ident, resource = $rp:ident) => {
        $crate::wit_conversions!(@common $wit, $md, $tp, $rp);
        $crate::wit_conversions!(@observations_to_wit $wit, $md, $tp, $rp, v0_1);
        $crate::wit_conversions!(@plans_from_wit $wit, $md, $tp, $rp, v0_1);
        $crate::wit_conversions!(@meta_from_wit $wit, $md, $tp, $rp);
    };

    // Small shared pieces, both directions.
    (@common $wit:ident, $md:ident, $tp:ident, $rp:ident) => {
        #[allow(dead_code)]
        fn key_values_to_wit(
            map: ::std::collections::BTreeMap<String, String>,
        ) -> Vec<$wit::KeyValue> {
            map.into_iter()
                .map(|(key, value)| $wit::KeyValue { key, value })
                .collect()
        }

        #[allow(dead_code)]
        fn key_values_from_wit(
            pairs: Vec<$wit::KeyValue>,
        ) -> ::std::collections::BTreeMap<String, String> {
            pairs.into_iter().map(|pair| (pair.key, pair.value)).collect()
        }

        #[allow(dead_code)]
        fn meta_to_wit(meta: $crate::ObjectMeta) -> $wit::ObjectMeta {
            $wit::ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                uid: meta.uid,
                generation: meta.generation,
                deletion_requested: meta.deletion_requested,
                finalizers: meta.finalizers,
                labels: key_values_to_wit(meta.labels),
                annotations: key_values_to_wit(meta.annotations),
            }
        }

        #[allow(dead_code)]
        fn meta_from_wit(meta: $wit::ObjectMeta) -> $crate::ObjectMeta {
            $crate::ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                uid: meta.uid,
                generation: meta.generation,
                deletion_requested: meta.deletion_requested,
                finalizers: meta.finalizers,
                labels: key_values_from_wit(meta.labels),
                annotations: key_values_from_wit(meta.annotations),
            }
        }

        #[allow(dead_code)]
        fn condition_to_wit(condition: $crate::Condition) -> $wit::Condition {
            $wit::Condition {
                kind: condition.kind,
                status: match condition.status {
                    $crate::ConditionStatus::True => $wit::ConditionStatus::True,
                    $crate::ConditionStatus::False => $wit::ConditionStatus::False,
                    $crate::ConditionStatus::Unknown => $wit::ConditionStatus::Unknown,
                },
                reason: condition.reason,
                message: condition.message,
            }
        }

        #[allow(dead_code)]
        fn condition_from_wit(condition: $wit::Condition) -> $crate::Condition {
            $crate::Condition {
                kind: condition.kind,
                status: match condition.status {
                    $wit::ConditionStatus::True => $crate::ConditionStatus::True,
                    $wit::ConditionStatus::False => $crate::ConditionStatus::False,
                    $wit::ConditionStatus::Unknown => $crate::ConditionStatus::Unknown,
                },
                reason: condition.reason,
                message: condition.message,
            }
        }

        #[allow(dead_code)]
        fn event_to_wit(event: $crate::Event) -> $wit::Event {
            $wit::Event {
                event_type: match event.event_type {
                    $crate::EventType::Normal => $wit::EventType::Normal,
                    $crate::EventType::Warning => $wit::EventType::Warning,
                },
                reason: event.reason,
                message: event.message,
            }
        }

        #[allow(dead_code)]
        fn event_from_wit(event: $wit::Event) -> $crate::Event {
            $crate::Event {
                event_type: match event.event_type {
                    $wit::EventType::Normal => $crate::EventType::Normal,
                    $wit::EventType::Warning => $crate::EventType::Warning,
                },
                reason: event.reason,
                message: event.message,
            }
        }

        #[allow(dead_code)]
        fn radius_error_to_wit(error: $crate::RadiusError) -> $wit::RadiusError {
            $wit::RadiusError {
                code: error.code,
                message: error.message,
            }
        }

        #[allow(dead_code)]
        fn radius_error_from_wit(error: $wit::RadiusError) -> $crate::RadiusError {
            $crate::RadiusError {
                code: error.code,
                message: error.message,
            }
        }

        #[allow(dead_code)]
        fn operation_kind_to_wit(kind: $crate::OperationKind) -> $wit::OperationKind {
            match kind {
                $crate::OperationKind::Deployment => $wit::OperationKind::Deployment,
                $crate::OperationKind::Deletion => $wit::OperationKind::Deletion,
            }
        }

        #[allow(dead_code)]
        fn operation_kind_from_wit(kind: $wit::OperationKind) -> $crate::OperationKind {
            match kind {
                $wit::OperationKind::Deployment => $crate::OperationKind::Deployment,
                $wit::OperationKind::Deletion => $crate::OperationKind::Deletion,
            }
        }

        #[allow(dead_code)]
        fn template_phase_to_wit(phase: $crate::TemplatePhase) -> $tp::TemplatePhase {
            match phase {
                $crate::TemplatePhase::Updating => $tp::TemplatePhase::Updating,
                $crate::TemplatePhase::Ready => $tp::TemplatePhase::Ready,
                $crate::TemplatePhase::ReadyPendingCleanup => $tp::TemplatePhase::ReadyPendingCleanup,
                $crate::TemplatePhase::Deleting => $tp::TemplatePhase::Deleting,
                $crate::TemplatePhase::Failed => $tp::TemplatePhase::Failed,
                $crate::TemplatePhase::Held => $tp::TemplatePhase::Held,
            }
        }

        #[allow(dead_code)]
        fn template_phase_from_wit(phase: $tp::TemplatePhase) -> $crate::TemplatePhase {
            match phase {
                $tp::TemplatePhase::Updating => $crate::TemplatePhase::Updating,
                $tp::TemplatePhase::Ready => $crate::TemplatePhase::Ready,
                $tp::TemplatePhase::ReadyPendingCleanup => $crate::TemplatePhase::ReadyPendingCleanup,
                $tp::TemplatePhase::Deleting => $crate::TemplatePhase::Deleting,
                $tp::TemplatePhase::Failed => $crate::TemplatePhase::Failed,
                $tp::TemplatePhase::Held => $crate::TemplatePhase::Held,
            }
        }
    };

    (@to_wit $wit:ident, $md:ident, $tp:ident, $rp:ident, v0_3) => {
        $crate::wit_conversions!(@observations_to_wit $wit, $md, $tp, $rp, v0_3);
        $crate::wit_conversions!(@plans_to_wit $wit, $md, $tp, $rp, v0_3);
    };
    (@from_wit $wit:ident, $md:ident, $tp:ident, $rp:ident, v0_3) => {
        $crate::wit_conversions!(@observations_from_wit $wit, $md, $tp, $rp, v0_3);
        $crate::wit_conversions!(@plans_from_wit $wit, $md, $tp, $rp, v0_3);
        $crate::wit_conversions!(@meta_from_wit $wit, $md, $tp, $rp);
    };

    // What differs between contract versions, going to WIT.
    (@resource_phase $rp:ident, v0_6) => {
        $crate::wit_conversions!(@resource_phase $rp, v0_3);
    };
    (@resource_phase $rp:ident, v0_3) => {
        #[allow(dead_code)]
        fn resource_phase_to_wit(phase: $crate::ResourcePhase) -> $rp::ResourcePhase {
            match phase {
                $crate::ResourcePhase::Ready => $rp::ResourcePhase::Ready,
                $crate::ResourcePhase::Deleting => $rp::ResourcePhase::Deleting,
                $crate::ResourcePhase::Failed => $rp::ResourcePhase::Failed,
                $crate::ResourcePhase::Missing => $rp::ResourcePhase::Missing,
            }
        }

        #[allow(dead_code)]
        fn resource_phase_from_wit(phase: $rp::ResourcePhase) -> $crate::ResourcePhase {
            match phase {
                $rp::ResourcePhase::Ready => $crate::ResourcePhase::Ready,
                $rp::ResourcePhase::Deleting => $crate::ResourcePhase::Deleting,
                $rp::ResourcePhase::Failed => $crate::ResourcePhase::Failed,
                $rp::ResourcePhase::Missing => $crate::ResourcePhase::Missing,
            }
        }

        #[allow(dead_code)]
        fn owned_phase_to_wit(phase: String) -> String {
            phase
        }
    };
    // Before 0.3 there is no `missing`: such a guest is shown `failed`.
    (@resource_phase $rp:ident, $older:ident) => {
        #[allow(dead_code)]
        fn resource_phase_to_wit(phase: $crate::ResourcePhase) -> $rp::ResourcePhase {
            match phase {
                $crate::ResourcePhase::Ready => $rp::ResourcePhase::Ready,
                $crate::ResourcePhase::Deleting => $rp::ResourcePhase::Deleting,
                $crate::ResourcePhase::Failed | $crate::ResourcePhase::Missing => {
                    $rp::ResourcePhase::Failed
                }
            }
        }

        #[allow(dead_code)]
        fn resource_phase_from_wit(phase: $rp::ResourcePhase) -> $crate::ResourcePhase {
            match phase {
                $rp::ResourcePhase::Ready => $crate::ResourcePhase::Ready,
                $rp::ResourcePhase::Deleting => $crate::ResourcePhase::Deleting,
                $rp::ResourcePhase::Failed => $crate::ResourcePhase::Failed,
            }
        }

        /// An owned resource's phase text, with `Missing` shown as `Failed`.
        #[allow(dead_code)]
        fn owned_phase_to_wit(phase: String) -> String {
            if phase == $crate::ResourcePhase::Missing.as_str() {
                $crate::ResourcePhase::Failed.as_str().to_string()
            } else {
                phase
            }
        }
    };
    (@refused_to_wit $wit:ident, v0_6) => {
        $crate::wit_conversions!(@refused_to_wit $wit, v0_2);
    };
    (@refused_to_wit $wit:ident, v0_3) => {
        $crate::wit_conversions!(@refused_to_wit $wit, v0_2);
    };
    (@refused_to_wit $wit:ident, v0_2) => {
        #[allow(dead_code)]
        fn refused_to_wit(error: $crate::RadiusError) -> $wit::OperationResult {
            $wit::OperationResult::Refused(radius_error_to_wit(error))
        }
    };
    (@refused_to_wit $wit:ident, v0_1) => {
        /// A 0.1 guest was always shown a refusal as a failed operation.
        #[allow(dead_code)]
        fn refused_to_wit(error: $crate::RadiusError) -> $wit::OperationResult {
            $wit::OperationResult::Failed(radius_error_to_wit(error))
        }
    };
    (@template_observation_literal $tp:ident, v0_6, $o:ident, $($field:ident),*) => {
        $tp::TemplateObservation {
            $($field,)*
            last_failure: $o.last_failure.map(failure_to_wit),
            dependency_cycle: $o.dependency_cycle,
            deployments: $o.deployments,
            deployed_age_ms: $o.deployed_age_ms,
            namespace: namespace_to_wit($o.namespace),
        }
    };
    (@template_observation_literal $tp:ident, v0_3, $o:ident, $($field:ident),*) => {
        $tp::TemplateObservation {
            $($field,)*
            last_failure: $o.last_failure.map(failure_to_wit),
            dependency_cycle: $o.dependency_cycle,
            deployments: $o.deployments,
            deployed_age_ms: $o.deployed_age_ms,
        }
    };
    (@template_observation_literal $tp:ident, v0_2, $o:ident, $($field:ident),*) => {
        $tp::TemplateObservation {
            $($field,)*
            last_failure: $o.last_failure.map(failure_to_wit),
            dependency_cycle: $o.dependency_cycle,
            deployments: $o.deployments,
        }
    };
    (@template_observation_literal $tp:ident, v0_1, $o:ident, $($field:ident),*) => {
        $tp::TemplateObservation { $($field,)* }
    };
    (@owned_resource_literal $tp:ident, v0_6, $owned:ident, $($field:ident),*) => {
        $crate::wit_conversions!(@owned_resource_literal $tp, v0_3, $owned, $($field),*)
    };
    (@owned_resource_literal $tp:ident, v0_3, $owned:ident, $($field:ident),*) => {
        $tp::OwnedResource {
            $($field,)*
            missing_age_ms: $owned.missing_age_ms,
        }
    };
    (@owned_resource_literal $tp:ident, $older:ident, $owned:ident, $($field:ident),*) => {
        $tp::OwnedResource { $($field,)* }
    };
    (@resource_observation_literal $rp:ident, v0_6, $o:ident, $($field:ident),*) => {
        $rp::ResourceObservation {
            $($field,)*
            last_failure: $o.last_failure.map(failure_to_wit),
            missing_age_ms: $o.missing_age_ms,
            namespace: namespace_to_wit($o.namespace),
        }
    };
    (@resource_observation_literal $rp:ident, v0_3, $o:ident, $($field:ident),*) => {
        $rp::ResourceObservation {
            $($field,)*
            last_failure: $o.last_failure.map(failure_to_wit),
            missing_age_ms: $o.missing_age_ms,
        }
    };
    (@resource_observation_literal $rp:ident, v0_2, $o:ident, $($field:ident),*) => {
        $rp::ResourceObservation {
            $($field,)*
            last_failure: $o.last_failure.map(failure_to_wit),
        }
    };
    (@resource_observation_literal $rp:ident, v0_1, $o:ident, $($field:ident),*) => {
        $rp::ResourceObservation { $($field,)* }
    };
    (@failure_to_wit $wit:ident, v0_6) => {
        $crate::wit_conversions!(@failure_to_wit $wit, v0_2);
    };
    (@failure_to_wit $wit:ident, v0_3) => {
        $crate::wit_conversions!(@failure_to_wit $wit, v0_2);
    };
    (@failure_to_wit $wit:ident, v0_2) => {
        #[allow(dead_code)]
        fn failure_to_wit(failure: $crate::FailureRecord) -> $wit::FailureRecord {
            $wit::FailureRecord {
                subject: failure.subject,
                count: failure.count,
                age_ms: failure.age_ms,
                error: radius_error_to_wit(failure.error),
            }
        }
    };
    (@failure_to_wit $wit:ident, v0_1) => {};
    (@namespace_to_wit $wit:ident, v0_6) => {
        #[allow(dead_code)]
        fn namespace_to_wit(namespace: $crate::NamespaceMeta) -> $wit::NamespaceMeta {
            $wit::NamespaceMeta {
                labels: key_values_to_wit(namespace.labels),
                annotations: key_values_to_wit(namespace.annotations),
            }
        }
    };
    // Before 0.6 a guest has no field for the namespace's metadata.
    (@namespace_to_wit $wit:ident, $older:ident) => {};
    (@namespace_from_wit $o:ident, v0_6) => {
        $crate::NamespaceMeta {
            labels: key_values_from_wit($o.namespace.labels),
            annotations: key_values_from_wit($o.namespace.annotations),
        }
    };
    (@namespace_from_wit $o:ident, v0_3) => {
        $crate::NamespaceMeta::default()
    };

    (@observations_to_wit $wit:ident, $md:ident, $tp:ident, $rp:ident, $v:ident) => {
        $crate::wit_conversions!(@failure_to_wit $wit, $v);
        $crate::wit_conversions!(@refused_to_wit $wit, $v);
        $crate::wit_conversions!(@resource_phase $rp, $v);
        $crate::wit_conversions!(@namespace_to_wit $wit, $v);

        #[allow(dead_code)]
        fn operation_to_wit(operation: $crate::OperationObservation) -> $wit::OperationObservation {
            $wit::OperationObservation {
                kind: operation_kind_to_wit(operation.kind),
                subject: operation.subject,
                result: match operation.result {
                    $crate::OperationResult::InProgress { retry_after_ms } => {
                        $wit::OperationResult::InProgress(retry_after_ms)
                    }
                    $crate::OperationResult::Succeeded { output_resources } => {
                        $wit::OperationResult::Succeeded(output_resources)
                    }
                    $crate::OperationResult::Failed(error) => {
                        $wit::OperationResult::Failed(radius_error_to_wit(error))
                    }
                    $crate::OperationResult::Canceled => $wit::OperationResult::Canceled,
                    $crate::OperationResult::NotFound => $wit::OperationResult::NotFound,
                    $crate::OperationResult::PollError(reason) => {
                        $wit::OperationResult::PollError(reason)
                    }
                    $crate::OperationResult::Refused(error) => refused_to_wit(error),
                },
            }
        }

        /// A template observation in WIT form.
        #[allow(dead_code)]
        pub fn template_observation_to_wit(
            observation: $crate::TemplateObservation,
        ) -> $tp::TemplateObservation {
            let o = observation;
            let meta = meta_to_wit(o.meta);
            let spec = $tp::TemplateSpec {
                template: o.spec.template,
                parameters: o.spec.parameters,
                provider_config: o.spec.provider_config,
            };
            let spec_hash = o.spec_hash;
            let status = $tp::TemplateStatus {
                phase: o.status.phase.map(template_phase_to_wit),
                message: o.status.message,
                observed_generation: o.status.observed_generation,
                status_hash: o.status.status_hash,
                output_resources: o.status.output_resources,
                conditions: o.status.conditions.into_iter().map(condition_to_wit).collect(),
            };
            let owned_resources = o
                .owned_resources
                .into_iter()
                .map(|owned| {
                    let name = owned.name;
                    let radius_id = owned.radius_id;
                    let deletion_requested = owned.deletion_requested;
                    let phase = owned_phase_to_wit(owned.phase);
                    $crate::wit_conversions!(@owned_resource_literal $tp, $v, owned,
                        name, radius_id, deletion_requested, phase)
                })
                .collect();
            let operation = o.operation.map(operation_to_wit);
            let dependencies = o
                .dependencies
                .into_iter()
                .map(|dependency| $tp::Dependency {
                    name: dependency.name,
                    exists: dependency.exists,
                    phase: dependency.phase.map(template_phase_to_wit),
                })
                .collect();
            $crate::wit_conversions!(@template_observation_literal $tp, $v, o,
                meta, spec, spec_hash, status, owned_resources, operation, dependencies)
        }

        /// A resource observation in WIT form.
        #[allow(dead_code)]
        pub fn resource_observation_to_wit(
            observation: $crate::ResourceObservation,
        ) -> $rp::ResourceObservation {
            let o = observation;
            let meta = meta_to_wit(o.meta);
            let radius_id = o.radius_id;
            let status = $rp::ResourceStatus {
                phase: o.status.phase.map(resource_phase_to_wit),
                message: o.status.message,
                conditions: o.status.conditions.into_iter().map(condition_to_wit).collect(),
            };
            let owner = o.owner.map(|owner| $rp::OwnerTemplate {
                name: owner.name,
                reference_uid: owner.reference_uid,
                found_uid: owner.found_uid,
                deletion_requested: owner.deletion_requested,
                annotations: key_values_to_wit(owner.annotations),
                provider_config: owner.provider_config,
            });
            let operation = o.operation.map(operation_to_wit);
            $crate::wit_conversions!(@resource_observation_literal $rp, $v, o,
                meta, radius_id, status, owner, operation)
        }
    };

    (@observations_from_wit $wit:ident, $md:ident, $tp:ident, $rp:ident, $v:ident) => {
        #[allow(dead_code)]
        fn failure_from_wit(failure: $wit::FailureRecord) -> $crate::FailureRecord {
            $crate::FailureRecord {
                subject: failure.subject,
                count: failure.count,
                age_ms: failure.age_ms,
                error: radius_error_from_wit(failure.error),
            }
        }

        #[allow(dead_code)]
        fn operation_from_wit(operation: $wit::OperationObservation) -> $crate::OperationObservation {
            $crate::OperationObservation {
                kind: operation_kind_from_wit(operation.kind),
                subject: operation.subject,
                result: match operation.result {
                    $wit::OperationResult::InProgress(retry_after_ms) => {
                        $crate::OperationResult::InProgress { retry_after_ms }
                    }
                    $wit::OperationResult::Succeeded(output_resources) => {
                        $crate::OperationResult::Succeeded { output_resources }
                    }
                    $wit::OperationResult::Failed(error) => {
                        $crate::OperationResult::Failed(radius_error_from_wit(error))
                    }
                    $wit::OperationResult::Canceled => $crate::OperationResult::Canceled,
                    $wit::OperationResult::NotFound => $crate::OperationResult::NotFound,
                    $wit::OperationResult::PollError(reason) => {
                        $crate::OperationResult::PollError(reason)
                    }
                    $wit::OperationResult::Refused(error) => {
                        $crate::OperationResult::Refused(radius_error_from_wit(error))
                    }
                },
            }
        }

        /// A template observation from its WIT form.
        #[allow(dead_code)]
        pub fn template_observation_from_wit(
            observation: $tp::TemplateObservation,
        ) -> $crate::TemplateObservation {
            let o = observation;
            let status = o.status;
            $crate::TemplateObservation {
                meta: meta_from_wit(o.meta),
                spec: $crate::TemplateSpec {
                    template: o.spec.template,
                    parameters: o.spec.parameters,
                    provider_config: o.spec.provider_config,
                },
                spec_hash: o.spec_hash,
                status: $crate::TemplateStatus {
                    phase: status.phase.map(template_phase_from_wit),
                    message: status.message,
                    observed_generation: status.observed_generation,
                    status_hash: status.status_hash,
                    output_resources: status.output_resources,
                    conditions: status.conditions.into_iter().map(condition_from_wit).collect(),
                },
                owned_resources: o
                    .owned_resources
                    .into_iter()
                    .map(|owned| $crate::OwnedResource {
                        name: owned.name,
                        radius_id: owned.radius_id,
                        deletion_requested: owned.deletion_requested,
                        phase: owned.phase,
                        missing_age_ms: owned.missing_age_ms,
                    })
                    .collect(),
                operation: o.operation.map(operation_from_wit),
                dependencies: o
                    .dependencies
                    .into_iter()
                    .map(|dependency| $crate::Dependency {
                        name: dependency.name,
                        exists: dependency.exists,
                        phase: dependency.phase.map(template_phase_from_wit),
                    })
                    .collect(),
                last_failure: o.last_failure.map(failure_from_wit),
                dependency_cycle: o.dependency_cycle,
                deployments: o.deployments,
                deployed_age_ms: o.deployed_age_ms,
                namespace: $crate::wit_conversions!(@namespace_from_wit o, $v),
            }
        }

        /// A resource observation from its WIT form.
        #[allow(dead_code)]
        pub fn resource_observation_from_wit(
            observation: $rp::ResourceObservation,
        ) -> $crate::ResourceObservation {
            let o = observation;
            $crate::ResourceObservation {
                meta: meta_from_wit(o.meta),
                radius_id: o.radius_id,
                status: $crate::ResourceStatus {
                    phase: o.status.phase.map(resource_phase_from_wit),
                    message: o.status.message,
                    conditions: o.status.conditions.into_iter().map(condition_from_wit).collect(),
                },
                owner: o.owner.map(|owner| $crate::OwnerTemplate {
                    name: owner.name,
                    reference_uid: owner.reference_uid,
                    found_uid: owner.found_uid,
                    deletion_requested: owner.deletion_requested,
                    annotations: key_values_from_wit(owner.annotations),
                    provider_config: owner.provider_config,
                }),
                operation: o.operation.map(operation_from_wit),
                last_failure: o.last_failure.map(failure_from_wit),
                missing_age_ms: o.missing_age_ms,
                namespace: $crate::wit_conversions!(@namespace_from_wit o, $v),
            }
        }
    };

    (@template_action_from_wit_newer $tp:ident, v0_5) => {
        #[allow(dead_code)]
        fn template_action_from_wit_newer(action: $tp::TemplateAction) -> $crate::TemplateAction {
            match action {
                $tp::TemplateAction::DeleteDeployment(id) => {
                    $crate::TemplateAction::DeleteDeployment(id)
                }
                $tp::TemplateAction::DetachResource(name) => {
                    $crate::TemplateAction::DetachResource(name)
                }
                _ => unreachable!("older actions are converted by template_action_from_wit"),
            }
        }
    };
    (@template_action_from_wit_newer $tp:ident, v0_6) => {
        $crate::wit_conversions!(@template_action_from_wit_newer $tp, v0_5);
    };
    (@detach_to_wit $tp:ident, v0_6, $name:ident) => {
        $tp::TemplateAction::DetachResource($name)
    };
    (@detach_to_wit $tp:ident, v0_5, $name:ident) => {
        $tp::TemplateAction::DetachResource($name)
    };
    (@detach_to_wit $tp:ident, v0_3, $name:ident) => {
        return Err(format!(
            "detachResource {}: contract 0.5 has the detach-resource action, this version does not",
            $name
        ))
    };
    (@template_action_from_wit_newer $tp:ident, v0_3) => {
        $crate::wit_conversions!(@template_action_from_wit_newer $tp, v0_2);
    };
    (@template_action_from_wit_newer $tp:ident, v0_2) => {
        #[allow(dead_code)]
        fn template_action_from_wit_newer(action: $tp::TemplateAction) -> $crate::TemplateAction {
            match action {
                $tp::TemplateAction::DeleteDeployment(id) => {
                    $crate::TemplateAction::DeleteDeployment(id)
                }
                _ => unreachable!("older actions are converted by template_action_from_wit"),
            }
        }
    };
    (@template_action_from_wit_newer $tp:ident, v0_1) => {
        #[allow(dead_code)]
        fn template_action_from_wit_newer(_action: $tp::TemplateAction) -> $crate::TemplateAction {
            unreachable!("a 0.1 guest has no actions newer than 0.1")
        }
    };

    (@plans_from_wit $wit:ident, $md:ident, $tp:ident, $rp:ident, $v:ident) => {
        $crate::wit_conversions!(@template_action_from_wit_newer $tp, $v);

        #[allow(dead_code, unreachable_patterns)]
        fn template_action_from_wit(action: $tp::TemplateAction) -> $crate::TemplateAction {
            match action {
                $tp::TemplateAction::AddFinalizer => $crate::TemplateAction::AddFinalizer,
                $tp::TemplateAction::RemoveFinalizer => $crate::TemplateAction::RemoveFinalizer,
                $tp::TemplateAction::EnsureResourceGroup(scope) => {
                    $crate::TemplateAction::EnsureResourceGroup(scope)
                }
                $tp::TemplateAction::StartDeployment(start) => {
                    $crate::TemplateAction::StartDeployment($crate::StartDeployment {
                        scope: start.scope,
                        deployment_name: start.deployment_name,
                    })
                }
                $tp::TemplateAction::CreateResource(create) => {
                    $crate::TemplateAction::CreateResource($crate::CreateResource {
                        name: create.name,
                        radius_id: create.radius_id,
                    })
                }
                $tp::TemplateAction::DeleteResource(name) => {
                    $crate::TemplateAction::DeleteResource(name)
                }
                $tp::TemplateAction::SetStatus(update) => {
                    $crate::TemplateAction::SetStatus($crate::TemplateStatusUpdate {
                        phase: update.phase.map(template_phase_from_wit),
                        message: update.message,
                        observed_generation: update.observed_generation,
                        status_hash: update.status_hash,
                        output_resources: update.output_resources,
                        conditions: update.conditions.into_iter().map(condition_from_wit).collect(),
                        clear_operation: update.clear_operation,
                    })
                }
                $tp::TemplateAction::EmitEvent(event) => {
                    $crate::TemplateAction::EmitEvent(event_from_wit(event))
                }
                $tp::TemplateAction::RequeueAfter(ms) => $crate::TemplateAction::RequeueAfter(ms),
                newer => template_action_from_wit_newer(newer),
            }
        }

        /// A template plan from its WIT form.
        #[allow(dead_code)]
        pub fn template_plan_from_wit(plan: $tp::TemplatePlan) -> $crate::TemplatePlan {
            $crate::TemplatePlan {
                actions: plan.actions.into_iter().map(template_action_from_wit).collect(),
            }
        }

        /// A resource plan from its WIT form.
        #[allow(dead_code)]
        pub fn resource_plan_from_wit(plan: $rp::ResourcePlan) -> $crate::ResourcePlan {
            let actions = plan
                .actions
                .into_iter()
                .map(|action| match action {
                    $rp::ResourceAction::AddFinalizer => $crate::ResourceAction::AddFinalizer,
                    $rp::ResourceAction::RemoveFinalizer => $crate::ResourceAction::RemoveFinalizer,
                    $rp::ResourceAction::StartRadiusDelete => {
                        $crate::ResourceAction::StartRadiusDelete
                    }
                    $rp::ResourceAction::SetStatus(update) => {
                        $crate::ResourceAction::SetStatus($crate::ResourceStatusUpdate {
                            phase: update.phase.map(resource_phase_from_wit),
                            message: update.message,
                            conditions: update.conditions.into_iter().map(condition_from_wit).collect(),
                            clear_operation: update.clear_operation,
                        })
                    }
                    $rp::ResourceAction::EmitEvent(event) => {
                        $crate::ResourceAction::EmitEvent(event_from_wit(event))
                    }
                    $rp::ResourceAction::RequeueAfter(ms) => $crate::ResourceAction::RequeueAfter(ms),
                })
                .collect();
            $crate::ResourcePlan { actions }
        }
    };
    (@plans_to_wit $wit:ident, $md:ident, $tp:ident, $rp:ident, $v:ident) => {
        /// A template plan in WIT form; `Err` names an action this
        /// contract version cannot carry (`detach-resource`, added after it).
        #[allow(dead_code)]
        pub fn template_plan_to_wit(
            plan: $crate::TemplatePlan,
        ) -> ::core::result::Result<$tp::TemplatePlan, String> {
            let mut actions = Vec::with_capacity(plan.actions.len());
            for action in plan.actions {
                actions.push(match action {
                    $crate::TemplateAction::AddFinalizer => $tp::TemplateAction::AddFinalizer,
                    $crate::TemplateAction::RemoveFinalizer => $tp::TemplateAction::RemoveFinalizer,
                    $crate::TemplateAction::EnsureResourceGroup(scope) => {
                        $tp::TemplateAction::EnsureResourceGroup(scope)
                    }
                    $crate::TemplateAction::StartDeployment(start) => {
                        $tp::TemplateAction::StartDeployment($tp::StartDeployment {
                            scope: start.scope,
                            deployment_name: start.deployment_name,
                        })
                    }
                    $crate::TemplateAction::CreateResource(create) => {
                        $tp::TemplateAction::CreateResource($tp::CreateResource {
                            name: create.name,
                            radius_id: create.radius_id,
                        })
                    }
                    $crate::TemplateAction::DeleteResource(name) => {
                        $tp::TemplateAction::DeleteResource(name)
                    }
                    $crate::TemplateAction::DetachResource(name) => {
                        $crate::wit_conversions!(@detach_to_wit $tp, $v, name)
                    }
                    $crate::TemplateAction::DeleteDeployment(id) => {
                        $tp::TemplateAction::DeleteDeployment(id)
                    }
                    $crate::TemplateAction::SetStatus(update) => {
                        $tp::TemplateAction::SetStatus($tp::TemplateStatusUpdate {
                            phase: update.phase.map(template_phase_to_wit),
                            message: update.message,
                            observed_generation: update.observed_generation,
                            status_hash: update.status_hash,
                            output_resources: update.output_resources,
                            conditions: update.conditions.into_iter().map(condition_to_wit).collect(),
                            clear_operation: update.clear_operation,
                        })
                    }
                    $crate::TemplateAction::EmitEvent(event) => {
                        $tp::TemplateAction::EmitEvent(event_to_wit(event))
                    }
                    $crate::TemplateAction::RequeueAfter(ms) => $tp::TemplateAction::RequeueAfter(ms),
                });
            }
            Ok($tp::TemplatePlan { actions })
        }

        /// A resource plan in WIT form.
        #[allow(dead_code)]
        pub fn resource_plan_to_wit(plan: $crate::ResourcePlan) -> $rp::ResourcePlan {
            let actions = plan
                .actions
                .into_iter()
                .map(|action| match action {
                    $crate::ResourceAction::AddFinalizer => $rp::ResourceAction::AddFinalizer,
                    $crate::ResourceAction::RemoveFinalizer => $rp::ResourceAction::RemoveFinalizer,
                    $crate::ResourceAction::StartRadiusDelete => {
                        $rp::ResourceAction::StartRadiusDelete
                    }
                    $crate::ResourceAction::SetStatus(update) => {
                        $rp::ResourceAction::SetStatus($rp::ResourceStatusUpdate {
                            phase: update.phase.map(resource_phase_to_wit),
                            message: update.message,
                            conditions: update.conditions.into_iter().map(condition_to_wit).collect(),
                            clear_operation: update.clear_operation,
                        })
                    }
                    $crate::ResourceAction::EmitEvent(event) => {
                        $rp::ResourceAction::EmitEvent(event_to_wit(event))
                    }
                    $crate::ResourceAction::RequeueAfter(ms) => $rp::ResourceAction::RequeueAfter(ms),
                })
                .collect();
            $rp::ResourcePlan { actions }
        }

        /// A policy error in WIT form.
        #[allow(dead_code)]
        pub fn policy_error_to_wit(error: $crate::PolicyError) -> $wit::PolicyError {
            $wit::PolicyError {
                code: error.code,
                message: error.message,
            }
        }

        /// A description in WIT form.
        #[allow(dead_code)]
        pub fn description_to_wit(description: $crate::Description) -> $md::Description {
            $md::Description {
                name: description.name,
                version: description.version,
                summary: description.summary,
                annotations: description
                    .annotations
                    .into_iter()
                    .map(|annotation| $md::AnnotationDoc {
                        name: annotation.name,
                        description: annotation.description,
                    })
                    .collect(),
            }
        }
    };

    (@meta_from_wit $wit:ident, $md:ident, $tp:ident, $rp:ident) => {
        /// A policy error from its WIT form.
        #[allow(dead_code)]
        pub fn policy_error_from_wit(error: $wit::PolicyError) -> $crate::PolicyError {
            $crate::PolicyError {
                code: error.code,
                message: error.message,
            }
        }

        /// A description from its WIT form.
        #[allow(dead_code)]
        pub fn description_from_wit(description: $md::Description) -> $crate::Description {
            $crate::Description {
                name: description.name,
                version: description.version,
                summary: description.summary,
                annotations: description
                    .annotations
                    .into_iter()
                    .map(|annotation| $crate::AnnotationDoc {
                        name: annotation.name,
                        description: annotation.description,
                    })
                    .collect(),
            }
        }
    };
}
