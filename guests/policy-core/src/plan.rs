//! Plan builders: collect a decision's actions in the order the host should
//! carry them out (effects, then status, then events, then requeue), and
//! write status only when it changes, so a settled object gets an empty plan.

use radwasm_policy_model::{
    Condition, ConditionStatus, Event, EventType, READY_CONDITION, ResourceAction, ResourcePhase,
    ResourcePlan, ResourceStatus, ResourceStatusUpdate, TemplateAction, TemplatePhase,
    TemplatePlan, TemplateStatus, TemplateStatusUpdate,
};

/// A `Ready` condition.
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

/// The status a template decision wants; `None` fields are left as they are.
#[derive(Debug, Default)]
pub struct DesiredTemplateStatus {
    pub phase: Option<TemplatePhase>,
    pub message: Option<String>,
    pub observed_generation: Option<i64>,
    pub status_hash: Option<String>,
    pub output_resources: Option<Vec<String>>,
    pub ready: Option<Condition>,
    pub clear_operation: bool,
}

/// Collects a template plan.
#[derive(Debug, Default)]
pub struct TemplatePlanner {
    effects: Vec<TemplateAction>,
    status: Option<TemplateStatusUpdate>,
    events: Vec<Event>,
    requeue_ms: Option<u32>,
}

impl TemplatePlanner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add an effect (finalizer, Radius call, DeploymentResource change).
    pub fn push(&mut self, action: TemplateAction) {
        self.effects.push(action);
    }

    /// Set the status; returns true if anything changes.
    pub fn status(&mut self, current: &TemplateStatus, desired: DesiredTemplateStatus) -> bool {
        let mut update = TemplateStatusUpdate {
            clear_operation: desired.clear_operation,
            ..TemplateStatusUpdate::default()
        };
        if desired.phase.is_some() && desired.phase != current.phase {
            update.phase = desired.phase;
        }
        if let Some(message) = desired.message.filter(|m| *m != current.message) {
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

    /// Emit an event.
    pub fn event(&mut self, event_type: EventType, reason: &str, message: impl Into<String>) {
        self.events.push(Event {
            event_type,
            reason: reason.to_string(),
            message: message.into(),
        });
    }

    /// Ask to be reconciled again after `ms` (the shortest request wins).
    pub fn requeue(&mut self, ms: u32) {
        self.requeue_ms = Some(self.requeue_ms.map_or(ms, |current| current.min(ms)));
    }

    pub fn finish(self) -> TemplatePlan {
        let mut actions = self.effects;
        actions.extend(self.status.map(TemplateAction::SetStatus));
        actions.extend(self.events.into_iter().map(TemplateAction::EmitEvent));
        actions.extend(self.requeue_ms.map(TemplateAction::RequeueAfter));
        TemplatePlan { actions }
    }
}

/// The status a resource decision wants.
#[derive(Debug, Default)]
pub struct DesiredResourceStatus {
    pub phase: Option<ResourcePhase>,
    pub message: Option<String>,
    pub ready: Option<Condition>,
    pub clear_operation: bool,
}

/// Collects a resource plan.
#[derive(Debug, Default)]
pub struct ResourcePlanner {
    effects: Vec<ResourceAction>,
    status: Option<ResourceStatusUpdate>,
    events: Vec<Event>,
    requeue_ms: Option<u32>,
}

impl ResourcePlanner {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, action: ResourceAction) {
        self.effects.push(action);
    }

    /// Set the status; returns true if anything changes.
    pub fn status(&mut self, current: &ResourceStatus, desired: DesiredResourceStatus) -> bool {
        let mut update = ResourceStatusUpdate {
            clear_operation: desired.clear_operation,
            ..ResourceStatusUpdate::default()
        };
        if desired.phase.is_some() && desired.phase != current.phase {
            update.phase = desired.phase;
        }
        if let Some(message) = desired.message.filter(|m| *m != current.message) {
            update.message = Some(message);
        }
        if let Some(ready) = desired
            .ready
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

    pub fn event(&mut self, event_type: EventType, reason: &str, message: impl Into<String>) {
        self.events.push(Event {
            event_type,
            reason: reason.to_string(),
            message: message.into(),
        });
    }

    pub fn requeue(&mut self, ms: u32) {
        self.requeue_ms = Some(self.requeue_ms.map_or(ms, |current| current.min(ms)));
    }

    pub fn finish(self) -> ResourcePlan {
        let mut actions = self.effects;
        actions.extend(self.status.map(ResourceAction::SetStatus));
        actions.extend(self.events.into_iter().map(ResourceAction::EmitEvent));
        actions.extend(self.requeue_ms.map(ResourceAction::RequeueAfter));
        ResourcePlan { actions }
    }
}
