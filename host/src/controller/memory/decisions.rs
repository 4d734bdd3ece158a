//! What the last decisions of an object leave for the next: the inputs of a
//! decision that left nothing to do (not decided again on the same), and
//! the operation a deployment it sent started (polled by its own URLs while
//! the record written before the deployment stands).

use super::{Part, PerObject};
use crate::radius::ResumeToken;

/// The inputs of the last decision, when it left nothing to do.
#[derive(Debug, Default)]
pub struct Settled(Option<u64>);

impl Part for Settled {
    fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl PerObject<Settled> {
    /// The last decision for the object was taken on `inputs` and left
    /// nothing to do (`None`: forget it).
    pub fn settled(&self, key: &str, inputs: Option<u64>) {
        match inputs {
            Some(_) => self.with(key, |state| state.0 = inputs),
            None => self.with_existing(key, |state| state.0 = None),
        };
    }

    /// True if the last decision was taken on these same `inputs` and left
    /// nothing to do.
    pub fn is_settled_on(&self, key: &str, inputs: u64) -> bool {
        self.read(key, |state| state.0 == Some(inputs))
            .unwrap_or(false)
    }
}

/// The operation a deployment the controller sent started, as Radius
/// answered, by the record written in status before it was sent.
#[derive(Debug, Default)]
pub struct StartedOperation(Option<(String, ResumeToken)>);

impl Part for StartedOperation {
    fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl PerObject<StartedOperation> {
    /// A deployment sent for the object started the operation `token`;
    /// status records it (written before it was sent) as `recorded`, which
    /// follows the deployment by its id. While that record stands, the
    /// operation's own URLs are polled instead. Losing this (a restart)
    /// only means polling the deployment itself.
    pub fn started(&self, key: &str, recorded: String, token: ResumeToken) {
        self.with(key, |state| state.0 = Some((recorded, token)));
    }

    /// The operation to poll for the record `recorded` in the object's
    /// status, if one was remembered for that record; one remembered for
    /// another record (the operation ended, another began) is forgotten.
    /// `None` for no record in status.
    pub fn for_record(&self, key: &str, recorded: Option<&str>) -> Option<ResumeToken> {
        self.with_existing(key, |state| {
            match (&state.0, recorded) {
                (Some((remembered, token)), Some(recorded)) if remembered == recorded => {
                    return Some(token.clone());
                }
                (None, _) => return None,
                _ => {}
            }
            state.0 = None;
            None
        })
        .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::super::ObjectMemory;
    use super::*;

    #[test]
    fn an_operations_urls_are_polled_only_while_its_record_stands() {
        let memory = ObjectMemory::default();
        let operations = &memory.operations;
        let token = |async_operation: Option<&str>| ResumeToken {
            kind: crate::radius::OperationKind::Deployment,
            resource_id:
                "/planes/radius/local/resourceGroups/g/providers/Microsoft.Resources/deployments/d"
                    .into(),
            async_operation: async_operation.map(str::to_string),
            location: None,
            subject: "hash".into(),
            rejected: None,
        };
        let record = token(None).encode();
        let started = token(Some(
            "/planes/radius/local/providers/System.Resources/locations/global/operationStatuses/1",
        ));
        assert_eq!(
            operations.for_record("t", Some(&record)),
            None,
            "nothing remembered"
        );
        operations.started("t", record.clone(), started.clone());
        assert_eq!(
            operations.for_record("t", Some(&record)),
            Some(started.clone())
        );
        assert_eq!(
            operations.for_record("t", Some(&record)),
            Some(started),
            "for as long as the record stands"
        );
        assert_eq!(
            operations.for_record("t", None),
            None,
            "the operation ended"
        );
        assert!(memory.is_empty(), "and is forgotten");
        operations.started("t", record.clone(), token(Some("/op/2")));
        assert_eq!(operations.for_record("t", Some("another record")), None);
        assert_eq!(operations.for_record("t", Some(&record)), None, "forgotten");
    }

    #[test]
    fn a_settled_decision_is_remembered_by_its_inputs_until_forgotten() {
        let memory = ObjectMemory::default();
        let settled = &memory.settled;
        assert!(!settled.is_settled_on("r", 7));
        settled.settled("r", Some(7));
        assert!(settled.is_settled_on("r", 7));
        assert!(!settled.is_settled_on("r", 8), "other inputs are decided");
        settled.settled("r", None);
        assert!(!settled.is_settled_on("r", 7));
        assert!(memory.is_empty());
    }
}
