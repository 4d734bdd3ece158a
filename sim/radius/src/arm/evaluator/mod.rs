//! The template evaluator: parameters, variables, user functions, resources
//! (identity, body, dependencies, copies, conditions), modules and outputs.
//! Everything is evaluated lazily with memoisation, so declaration order does
//! not matter and cycles are reported instead of recursing forever.
//!
//! A Bicep module is a nested `Microsoft.Resources/deployments` resource with
//! an inline template evaluated in the `inner` scope. Its parameters are
//! evaluated here, in the declaring template; its template by an evaluator of
//! its own, which sees nothing of the declaring template but those parameters.
//! What `reference()` answers for a module is the deployment's properties
//! (`outputs` included), and the resources it deploys take its place in the
//! result, in order.
//!
//! The evaluator is one [`Evaluator`], its methods grouped by concern:
//! [`parameters`] and [`variables`] (with user-defined functions) are the
//! template's named values; [`resources`] declares instances and finds
//! their identities and bodies, [`modules`] evaluates nested deployments;
//! [`dependencies`] orders the instances and [`results`] reports them with
//! the outputs; [`expressions`] evaluates values and expressions, and
//! [`template_functions`] the functions that need the template or the
//! deployment.

mod dependencies;
mod expressions;
mod modules;
mod parameters;
mod resources;
mod results;
mod template_functions;
mod variables;

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

use super::functions::type_name;
use super::{Evaluation, EvaluationRequest, ExistingLookup};
use crate::error::ArmError;
use crate::ids;

enum Slot {
    Pending,
    Busy,
    Done(Value),
}

struct Parameter<'a> {
    name: String,
    declaration: &'a Map<String, Value>,
    supplied: Option<Value>,
    slot: Slot,
}

enum VariableSource<'a> {
    Plain(&'a Value),
    /// An entry of the variables' `copy` array.
    Copy(&'a Map<String, Value>),
}

struct Variable<'a> {
    name: String,
    source: VariableSource<'a>,
    slot: Slot,
}

#[derive(Clone)]
struct CopyFrame {
    name: Option<String>,
    index: usize,
}

#[derive(Clone)]
struct Identity {
    name: String,
    resource_type: String,
    api_version: Option<String>,
    id: String,
}

struct Instance<'a> {
    /// The declaration's symbolic name (`env`); empty for array templates.
    symbol: String,
    /// `env`, `env[3]`, or for arrays `resources[2]` until the name is known.
    instance_name: String,
    declaration: &'a Map<String, Value>,
    /// Where the declaration is, for error messages.
    location: String,
    copy: Option<CopyFrame>,
    extensible: bool,
    existing: bool,
    /// A nested deployment with an inline template (a Bicep module).
    module: bool,
    deployed: bool,
    identity: Option<Identity>,
    identity_busy: bool,
    body: Slot,
    /// Instances whose `reference()`/`resourceInfo()` this one's body used.
    references: BTreeSet<usize>,
    /// For a module, what its template deployed (set with its body).
    nested: Option<Evaluation>,
}

pub(super) struct Evaluator<'a> {
    scope: String,
    deployment_name: String,
    template: &'a Map<String, Value>,
    parameters: Vec<Parameter<'a>>,
    variables: Vec<Variable<'a>>,
    functions: HashMap<String, &'a Map<String, Value>>,
    function_frames: Vec<HashMap<String, Value>>,
    instances: Vec<Instance<'a>>,
    /// Lower-case symbolic names, instance names and copy loop names.
    symbols: HashMap<String, Vec<usize>>,
    copy_frames: Vec<CopyFrame>,
    /// Instances whose body is being evaluated, innermost last.
    evaluating: Vec<usize>,
    existing: Option<ExistingLookup<'a>>,
    /// Active [`Evaluator::eval_value`] and [`Evaluator::eval_expr`] calls,
    /// at most [`MAX_NESTING`].
    nesting: usize,
    /// Weight ([`weight`]) of the values this evaluation and the modules in
    /// it have produced so far, at most [`MAX_PRODUCED`].
    produced: usize,
}

/// Deepest recursion of one evaluation, counted in nested values and
/// expressions, which every chain of variables, parameters, functions and
/// references passes through. Fits the stack [`super::evaluate`] runs on
/// with room to spare, even in a debug build.
pub(super) const MAX_NESTING: usize = 4096;

/// Most one evaluation (with its modules) may produce, counted by [`weight`]
/// over every expression's value and every copy loop's element: 64 MiB,
/// hundreds of times what a real Radius application needs. Strings are
/// bounded one by one ([`super::functions::MAX_STRING_BYTES`]), but arrays
/// and objects were not: forty variables each `concat` of the one before
/// twice, or copy loops of 800 elements nested five deep, asked for 2^40
/// values and ran the whole process out of memory.
pub(super) const MAX_PRODUCED: usize = 64 << 20;

/// The cost of a value: 16 per JSON value (a number, each element, each
/// member) plus the bytes of its strings and member names; about its size
/// as JSON text, and proportional to the work and memory it took.
fn weight(value: &Value) -> usize {
    let mut total = 0usize;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        total = total.saturating_add(16);
        match value {
            Value::String(text) => total = total.saturating_add(text.len()),
            Value::Array(items) => pending.extend(items),
            Value::Object(map) => {
                for (key, item) in map {
                    total = total.saturating_add(key.len());
                    pending.push(item);
                }
            }
            _ => {}
        }
    }
    total
}

fn object<'v>(value: &'v Value, what: &str) -> Result<&'v Map<String, Value>, ArmError> {
    value
        .as_object()
        .ok_or_else(|| ArmError::invalid_template(format!("{what} must be a JSON object")))
}

impl<'a> Evaluator<'a> {
    pub(super) fn run(request: &EvaluationRequest<'a>) -> Result<Evaluation, ArmError> {
        Self::run_nested(request, 0, &mut 0)
    }

    /// [`Evaluator::run`] for a template `nesting` levels deep into another
    /// evaluation (a module) that has `produced` so far, so the bounds on
    /// recursion and on what is produced cover both; `produced` is updated.
    fn run_nested(
        request: &EvaluationRequest<'a>,
        nesting: usize,
        produced: &mut usize,
    ) -> Result<Evaluation, ArmError> {
        let template = request.template.as_object().ok_or_else(|| {
            ArmError::invalid_template(format!(
                "The template must be a JSON object but is {}",
                type_name(request.template)
            ))
        })?;
        let scope = ids::normalize_scope(request.scope).map_err(ArmError::invalid_template)?;
        let mut evaluator = Evaluator {
            scope,
            deployment_name: request.deployment_name.to_string(),
            template,
            parameters: Vec::new(),
            variables: Vec::new(),
            functions: HashMap::new(),
            function_frames: Vec::new(),
            instances: Vec::new(),
            symbols: HashMap::new(),
            copy_frames: Vec::new(),
            evaluating: Vec::new(),
            existing: request.existing,
            nesting,
            produced: *produced,
        };
        let evaluation = evaluator.evaluate_all(request.parameters);
        *produced = evaluator.produced;
        evaluation
    }

    fn evaluate_all(&mut self, parameters: &Value) -> Result<Evaluation, ArmError> {
        self.declare_parameters(parameters)?;
        self.declare_variables()?;
        self.declare_functions()?;
        for index in 0..self.parameters.len() {
            self.parameter_value(index)?;
        }
        for index in 0..self.variables.len() {
            self.variable_value(index)?;
        }
        self.declare_resources()?;
        for index in 0..self.instances.len() {
            self.identity(index)?;
        }
        self.check_duplicates()?;
        for index in 0..self.instances.len() {
            if self.instances[index].deployed {
                self.body(index)?;
            }
        }
        let order = self.order()?;
        let outputs = self.outputs()?;
        let (resources, modules) = self.results(&order);
        Ok(Evaluation {
            resources,
            outputs,
            modules,
        })
    }
}
