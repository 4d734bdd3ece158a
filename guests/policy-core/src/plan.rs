//! Plan builders: collect a decision's actions in the order the host should
//! carry them out (effects, then status, then events, then requeue), and
//! write status only when it changes, so a settled object gets an empty plan.
//!
//! A custom policy that makes a decision of its own (rather than returning
//! the default policy's) should build its plan with [`TemplatePlanner`] or
//! [`ResourcePlanner`]: create one, add actions in any order, and call
//! `finish`:
//!
//! ```
//! use radwasm_policy_core::plan::{DesiredTemplateStatus, TemplatePlanner, ready_condition};
//! use radwasm_policy_model::{ConditionStatus, EventType, TemplatePhase, TemplateStatus};
//!
//! let current = TemplateStatus::default(); // observation.status
//! let mut plan = TemplatePlanner::new();
//! let changed = plan.status(
//!     &current,
//!     DesiredTemplateStatus {
//!         phase: Some(TemplatePhase::Failed),
//!         message: Some("refused: no team label".into()),
//!         ready: Some(ready_condition(ConditionStatus::False, "MissingTeamLabel", "refused: no team label")),
//!         ..Default::default()
//!     },
//! );
//! if changed {
//!     // Only when the status changes, so the event is not repeated on
//!     // every reconcile.
//!     plan.event(EventType::Warning, "MissingTeamLabel", "refused: no team label");
//! }
//! let plan = plan.finish();
//! assert_eq!(plan.actions.len(), 2); // setStatus, emitEvent
//! ```
//!
//! Every message a plan carries (status message, `Ready` condition message,
//! event) passes through [`bounded`] here, so none can outgrow what the host
//! accepts however long the values quoted in it (a Radius error, an id, a
//! list of names, an annotation value).

use radwasm_policy_model::{
    Condition, ConditionStatus, Event, EventType, READY_CONDITION, ResourceAction, ResourcePhase,
    ResourcePlan, ResourceStatus, ResourceStatusUpdate, TemplateAction, TemplatePhase,
    TemplatePlan, TemplateStatus, TemplateStatusUpdate,
};

/// Longest message a plan carries, in characters: a status message, a
/// condition message or an event. At four bytes a character at most, and with
/// the note [`cut`] adds, this stays well under the 32 KiB the host accepts
/// (`host/src/controller/guard.rs`).
pub const MAX_MESSAGE_CHARS: usize = 4096;

/// Where `text` is cut to keep its first `max_chars` characters; `None` if
/// it is no longer than that.
fn cut_at(text: &str, max_chars: usize) -> Option<usize> {
    if text.len() <= max_chars {
        // Never more characters than bytes.
        return None;
    }
    text.char_indices().nth(max_chars).map(|(at, _)| at)
}

/// `text`, or its first `max_chars` characters followed by `… (N bytes in
/// all)`, so a reader sees that it was cut and how much is missing. Use it
/// for a long value quoted inside a message (the planners already bound the
/// whole message with [`bounded`]).
pub fn cut(text: &str, max_chars: usize) -> String {
    match cut_at(text, max_chars) {
        None => text.to_string(),
        Some(at) => format!("{}… ({} bytes in all)", &text[..at], text.len()),
    }
}

/// `text` as a quoted string, cut like [`cut`]: `"abc"… (N bytes in all)`.
/// Use it to quote a value that may be long or contain anything (an
/// annotation, a name from the spec) inside a message.
pub fn quote(text: &str, max_chars: usize) -> String {
    match cut_at(text, max_chars) {
        None => format!("{text:?}"),
        Some(at) => format!("{:?}… ({} bytes in all)", &text[..at], text.len()),
    }
}

/// A message as a plan carries it: [`cut`] after [`MAX_MESSAGE_CHARS`]
/// characters. The planners apply it to every message they are given.
pub fn bounded(message: String) -> String {
    match cut_at(&message, MAX_MESSAGE_CHARS) {
        None => message,
        Some(_) => cut(&message, MAX_MESSAGE_CHARS),
    }
}

fn bounded_condition(mut condition: Condition) -> Condition {
    condition.message = bounded(condition.message);
    condition
}

/// A `Ready` condition with this status, reason (a CamelCase word, as
/// Kubernetes conventions ask) and message: the `ready` of a
/// [`DesiredTemplateStatus`] or [`DesiredResourceStatus`]. The planner bounds
/// the message and writes the condition only if it differs from the current
/// one.
pub fn ready_condition(status: ConditionStatus, reason: &str, message: &str) -> Condition {
    Condition {
        kind: READY_CONDITION.to_string(),
        status,
        reason: reason.to_string(),
        message: message.to_string(),
    }
}

fn ready_differs(current: &[Condition], desired: &Condition) -> bool {
    current.iter().find(|c| c.kind == desired.kind) != Some(desired)
}

/// The status a template decision wants, for [`TemplatePlanner::status`];
/// `None` fields are left as they are. Build it with `..Default::default()`
/// and set only what the decision is about.
#[derive(Debug, Default)]
pub struct DesiredTemplateStatus {
    /// `status.phase`.
    pub phase: Option<TemplatePhase>,
    /// `status.message`, for people (bounded by the planner).
    pub message: Option<String>,
    /// `status.observedGeneration`: set it to `observation.meta.generation`
    /// when the decision is about the current spec.
    pub observed_generation: Option<i64>,
    /// The Radius status hash of the deployed spec (the default policy's
    /// bookkeeping; a custom policy rarely sets it).
    pub status_hash: Option<String>,
    /// The Radius ids the last deployment produced (the default policy's
    /// bookkeeping).
    pub output_resources: Option<Vec<String>>,
    /// The `Ready` condition (see [`ready_condition`]).
    pub ready: Option<Condition>,
    /// Forget the Radius operation recorded in status (it finished or is
    /// abandoned).
    pub clear_operation: bool,
}

impl DesiredTemplateStatus {
    /// `phase` at `generation`, not Ready: `message` in status and in a
    /// `Ready` condition False with `reason`. Add other fields with
    /// `..DesiredTemplateStatus::not_ready(...)`.
    pub fn not_ready(phase: TemplatePhase, generation: i64, reason: &str, message: String) -> Self {
        DesiredTemplateStatus {
            phase: Some(phase),
            ready: Some(ready_condition(ConditionStatus::False, reason, &message)),
            message: Some(message),
            observed_generation: Some(generation),
            ..Default::default()
        }
    }
}

/// Collects a template plan: effects with [`push`](Self::push), at most one
/// status change with [`status`](Self::status), events with
/// [`event`](Self::event), a requeue with [`requeue`](Self::requeue); then
/// [`finish`](Self::finish) puts them in the order the host carries them
/// out. Use it whenever a policy builds a `DeploymentTemplate` plan itself.
#[derive(Debug, Default)]
pub struct TemplatePlanner {
    effects: Vec<TemplateAction>,
    status: Option<TemplateStatusUpdate>,
    events: Vec<Event>,
    requeue_ms: Option<u32>,
}

impl TemplatePlanner {
    /// An empty plan.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add an effect (finalizer, Radius call, DeploymentResource change);
    /// effects are carried out in the order pushed, before the status.
    /// `SetStatus`, `EmitEvent` and `RequeueAfter` have methods of their own
    /// that keep the plan's order and dedupe; use those instead.
    pub fn push(&mut self, action: TemplateAction) {
        self.effects.push(action);
    }

    /// Set the status to `desired` over `current` (the observation's
    /// `status`): only the fields that differ are written, messages are
    /// [`bounded`], and nothing at all is written if nothing differs, so a
    /// settled object gets an empty plan. Returns true if anything changes:
    /// emit an event only then, or it is repeated on every reconcile. A
    /// second call replaces the first.
    pub fn status(&mut self, current: &TemplateStatus, desired: DesiredTemplateStatus) -> bool {
        let mut update = TemplateStatusUpdate {
            clear_operation: desired.clear_operation,
            ..TemplateStatusUpdate::default()
        };
        if desired.phase.is_some() && desired.phase != current.phase {
            update.phase = desired.phase;
        }
        if let Some(message) = desired
            .message
            .map(bounded)
            .filter(|m| *m != current.message)
        {
            update.message = Some(message);
        }
        if let Some(generation) = desired
            .observed_generation
            .filter(|g| *g != current.observed_generation)
        {
            update.observed_generation = Some(generation);
        }
        if let Some(hash) = desired
            .status_hash
            .filter(|h| current.status_hash.as_ref() != Some(h))
        {
            update.status_hash = Some(hash);
        }
        if let Some(ids) = desired
            .output_resources
            .filter(|ids| *ids != current.output_resources)
        {
            update.output_resources = Some(ids);
        }
        if let Some(ready) = desired
            .ready
            .map(bounded_condition)
            .filter(|ready| ready_differs(&current.conditions, ready))
        {
            update.conditions.push(ready);
        }
        let changed = update != TemplateStatusUpdate::default();
        if changed {
            self.status = Some(update);
        }
        changed
    }

    /// Emit a Kubernetes Event on the object (its message [`bounded`]), for
    /// a change worth telling people about; reason in CamelCase.
    pub fn event(&mut self, event_type: EventType, reason: &str, message: impl Into<String>) {
        self.events.push(Event {
            event_type,
            reason: reason.to_string(),
            message: bounded(message.into()),
        });
    }

    /// Ask to be reconciled again after `ms` milliseconds even if nothing
    /// changes (to poll an operation, to retry later); the shortest request
    /// wins. Without one, the object is decided again only when it or what
    /// it depends on changes.
    pub fn requeue(&mut self, ms: u32) {
        self.requeue_ms = Some(self.requeue_ms.map_or(ms, |current| current.min(ms)));
    }

    /// The plan: effects in the order pushed, then the status change, then
    /// the events, then the requeue.
    pub fn finish(self) -> TemplatePlan {
        let mut actions = self.effects;
        actions.extend(self.status.map(TemplateAction::SetStatus));
        actions.extend(self.events.into_iter().map(TemplateAction::EmitEvent));
        actions.extend(self.requeue_ms.map(TemplateAction::RequeueAfter));
        TemplatePlan { actions }
    }
}

/// The status a resource decision wants, for [`ResourcePlanner::status`];
/// `None` fields are left as they are.
#[derive(Debug, Default)]
pub struct DesiredResourceStatus {
    /// `status.phase`.
    pub phase: Option<ResourcePhase>,
    /// `status.message`, for people (bounded by the planner).
    pub message: Option<String>,
    /// The `Ready` condition (see [`ready_condition`]).
    pub ready: Option<Condition>,
    /// Forget the Radius operation recorded in status (it finished or is
    /// abandoned).
    pub clear_operation: bool,
}

/// Collects a resource plan, as [`TemplatePlanner`] does a template's: use it
/// whenever a policy builds a `DeploymentResource` plan itself.
#[derive(Debug, Default)]
pub struct ResourcePlanner {
    effects: Vec<ResourceAction>,
    status: Option<ResourceStatusUpdate>,
    events: Vec<Event>,
    requeue_ms: Option<u32>,
}

impl ResourcePlanner {
    /// An empty plan.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add an effect (finalizer, Radius call); effects are carried out in
    /// the order pushed, before the status. Use the methods below for
    /// status, events and requeues.
    pub fn push(&mut self, action: ResourceAction) {
        self.effects.push(action);
    }

    /// Set the status to `desired` over `current`, writing only what
    /// differs (see [`TemplatePlanner::status`]); returns true if anything
    /// changes.
    pub fn status(&mut self, current: &ResourceStatus, desired: DesiredResourceStatus) -> bool {
        let mut update = ResourceStatusUpdate {
            clear_operation: desired.clear_operation,
            ..ResourceStatusUpdate::default()
        };
        if desired.phase.is_some() && desired.phase != current.phase {
            update.phase = desired.phase;
        }
        if let Some(message) = desired
            .message
            .map(bounded)
            .filter(|m| *m != current.message)
        {
            update.message = Some(message);
        }
        if let Some(ready) = desired
            .ready
            .map(bounded_condition)
            .filter(|ready| ready_differs(&current.conditions, ready))
        {
            update.conditions.push(ready);
        }
        let changed = update != ResourceStatusUpdate::default();
        if changed {
            self.status = Some(update);
        }
        changed
    }

    /// Emit a Kubernetes Event on the object (its message [`bounded`]).
    pub fn event(&mut self, event_type: EventType, reason: &str, message: impl Into<String>) {
        self.events.push(Event {
            event_type,
            reason: reason.to_string(),
            message: bounded(message.into()),
        });
    }

    /// Ask to be reconciled again after `ms` milliseconds; the shortest
    /// request wins.
    pub fn requeue(&mut self, ms: u32) {
        self.requeue_ms = Some(self.requeue_ms.map_or(ms, |current| current.min(ms)));
    }

    /// The plan: effects in the order pushed, then the status change, then
    /// the events, then the requeue.
    pub fn finish(self) -> ResourcePlan {
        let mut actions = self.effects;
        actions.extend(self.status.map(ResourceAction::SetStatus));
        actions.extend(self.events.into_iter().map(ResourceAction::EmitEvent));
        actions.extend(self.requeue_ms.map(ResourceAction::RequeueAfter));
        ResourcePlan { actions }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_are_left_whole() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(quote("abc", 3), "\"abc\"");
        let message = "é".repeat(MAX_MESSAGE_CHARS);
        assert_eq!(bounded(message.clone()), message);
    }

    #[test]
    fn long_texts_are_cut_visibly_on_a_character_boundary() {
        assert_eq!(cut("abcd", 3), "abc… (4 bytes in all)");
        assert_eq!(quote("ééé", 2), "\"éé\"… (6 bytes in all)");
        for unit in ["x", "é", "😀"] {
            let message = bounded(unit.repeat(40_000));
            assert!(message.len() <= 16 * 1024 + 32, "{} bytes", message.len());
            assert!(
                message.starts_with(&unit.repeat(MAX_MESSAGE_CHARS))
                    && message.ends_with(&format!("… ({} bytes in all)", 40_000 * unit.len())),
                "{message:.80}"
            );
        }
    }

    #[test]
    fn planners_bound_every_message_they_are_given() {
        let long = "x".repeat(40_000);
        let mut plan = TemplatePlanner::new();
        plan.status(
            &TemplateStatus::default(),
            DesiredTemplateStatus {
                message: Some(long.clone()),
                ready: Some(ready_condition(ConditionStatus::False, "R", &long)),
                ..Default::default()
            },
        );
        plan.event(EventType::Warning, "R", long.clone());
        let mut resource = ResourcePlanner::new();
        resource.status(
            &ResourceStatus::default(),
            DesiredResourceStatus {
                message: Some(long.clone()),
                ready: Some(ready_condition(ConditionStatus::False, "R", &long)),
                ..Default::default()
            },
        );
        resource.event(EventType::Warning, "R", long);
        let mut messages = Vec::new();
        for action in plan.finish().actions {
            match action {
                TemplateAction::SetStatus(update) => {
                    messages.extend(update.message);
                    messages.extend(update.conditions.into_iter().map(|c| c.message));
                }
                TemplateAction::EmitEvent(event) => messages.push(event.message),
                _ => {}
            }
        }
        for action in resource.finish().actions {
            match action {
                ResourceAction::SetStatus(update) => {
                    messages.extend(update.message);
                    messages.extend(update.conditions.into_iter().map(|c| c.message));
                }
                ResourceAction::EmitEvent(event) => messages.push(event.message),
                _ => {}
            }
        }
        assert_eq!(messages.len(), 6);
        for message in messages {
            assert_eq!(message, bounded("x".repeat(40_000)));
        }
    }
}
