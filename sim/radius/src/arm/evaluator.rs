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

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

use super::expr::{Expr, TemplateString, parse_template_string};
use super::functions::{self, stringify, type_name};
use super::{EvaluatedResource, Evaluation, EvaluationRequest, ExistingLookup, ModuleDeployment};
use crate::error::ArmError;
use crate::ids;

/// Keys of a classic (non-extensible) resource declaration that belong to
/// the template, not to the body sent to the provider.
const TEMPLATE_ONLY_KEYS: &[&str] = &[
    "type",
    "apiVersion",
    "dependsOn",
    "condition",
    "copy",
    "existing",
    "comments",
    "import",
    "extension",
    "scope",
    "resourceGroup",
    "subscriptionId",
    "metadata",
    "resources",
];

/// The type of a nested deployment, which is what Bicep compiles a module to.
const DEPLOYMENTS_TYPE: &str = "microsoft.resources/deployments";

/// Fields of a nested deployment's `properties` the simulator cannot honour.
const UNSUPPORTED_MODULE_PROPERTIES: &[&str] =
    &["templateLink", "parametersLink", "onErrorDeployment"];

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
/// bounded one by one ([`functions::MAX_STRING_BYTES`]), but arrays and
/// objects were not: forty variables each `concat` of the one before twice,
/// or copy loops of 800 elements nested five deep, asked for 2^40 values and
/// ran the whole process out of memory.
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

fn template_type(declaration: &Map<String, Value>) -> Option<String> {
    declaration
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
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

    // ----- parameters -------------------------------------------------

    fn declare_parameters(&mut self, supplied: &Value) -> Result<(), ArmError> {
        let mut supplied_values: Vec<(String, Value)> = Vec::new();
        match supplied {
            Value::Null => {}
            Value::Object(map) => {
                for (name, entry) in map {
                    let value = match entry {
                        Value::Object(entry) if entry.contains_key("value") => {
                            entry.get("value").cloned().unwrap_or(Value::Null)
                        }
                        Value::Object(entry) if entry.contains_key("reference") => {
                            return Err(ArmError::invalid_request_content(format!(
                                "The parameter '{name}' uses a Key Vault 'reference', which the Radius simulator does not support"
                            )));
                        }
                        _ => {
                            return Err(ArmError::invalid_request_content(format!(
                                "The parameter '{name}' is not an ARM parameter value: expected {{\"{name}\": {{\"value\": ...}}}} but got {}",
                                type_name(entry)
                            )));
                        }
                    };
                    supplied_values.push((name.clone(), value));
                }
            }
            other => {
                return Err(ArmError::invalid_request_content(format!(
                    "'parameters' must be an ARM parameters object ({{\"name\": {{\"value\": ...}}}}) but is {}",
                    type_name(other)
                )));
            }
        }
        let declarations = match self.template.get("parameters") {
            None | Some(Value::Null) => None,
            Some(value) => Some(object(value, "The template's 'parameters'")?),
        };
        if let Some(declarations) = declarations {
            for (name, declaration) in declarations {
                let declaration = object(declaration, &format!("The parameter '{name}'"))?;
                let supplied = supplied_values
                    .iter()
                    .position(|(n, _)| n.eq_ignore_ascii_case(name))
                    .map(|at| supplied_values.remove(at).1);
                self.parameters.push(Parameter {
                    name: name.clone(),
                    declaration,
                    supplied,
                    slot: Slot::Pending,
                });
            }
        }
        if !supplied_values.is_empty() {
            let names: Vec<String> = supplied_values.into_iter().map(|(n, _)| n).collect();
            return Err(ArmError::invalid_template(format!(
                "The template parameters '{}' in the parameters are not valid; they are not present in the original template and can therefore not be provided at deployment time",
                names.join(", ")
            )));
        }
        Ok(())
    }

    fn parameter_value(&mut self, index: usize) -> Result<Value, ArmError> {
        match &self.parameters[index].slot {
            Slot::Done(value) => return Ok(value.clone()),
            Slot::Busy => {
                return Err(ArmError::invalid_template(format!(
                    "The default value of parameter '{}' refers to itself (circular reference)",
                    self.parameters[index].name
                )));
            }
            Slot::Pending => {}
        }
        self.parameters[index].slot = Slot::Busy;
        let result = self.compute_parameter(index);
        self.parameters[index].slot = match &result {
            Ok(value) => Slot::Done(value.clone()),
            Err(_) => Slot::Pending,
        };
        result
    }

    fn compute_parameter(&mut self, index: usize) -> Result<Value, ArmError> {
        let name = self.parameters[index].name.clone();
        let declaration = self.parameters[index].declaration;
        let value = match self.parameters[index].supplied.clone() {
            Some(value) => value,
            None => match declaration.get("defaultValue") {
                Some(default) => {
                    self.eval_value(default, &format!("parameters.{name}.defaultValue"))?
                }
                None if declaration
                    .get("nullable")
                    .and_then(Value::as_bool)
                    .unwrap_or(false) =>
                {
                    Value::Null
                }
                None => {
                    return Err(ArmError::invalid_template(format!(
                        "The value for the template parameter '{name}' is not provided and it has no defaultValue"
                    )));
                }
            },
        };
        check_parameter(&name, declaration, &value)?;
        Ok(value)
    }

    // ----- variables and functions --------------------------------------

    fn declare_variables(&mut self) -> Result<(), ArmError> {
        let Some(variables) = self.template.get("variables").filter(|v| !v.is_null()) else {
            return Ok(());
        };
        for (name, value) in object(variables, "The template's 'variables'")? {
            if name == "copy" {
                let Value::Array(entries) = value else {
                    return Err(ArmError::invalid_template(
                        "The variables' 'copy' must be an array",
                    ));
                };
                for entry in entries {
                    let entry = object(entry, "A variables 'copy' entry")?;
                    let copy_name = entry.get("name").and_then(Value::as_str).ok_or_else(|| {
                        ArmError::invalid_template("A variables 'copy' entry has no 'name'")
                    })?;
                    self.variables.push(Variable {
                        name: copy_name.to_string(),
                        source: VariableSource::Copy(entry),
                        slot: Slot::Pending,
                    });
                }
                continue;
            }
            self.variables.push(Variable {
                name: name.clone(),
                source: VariableSource::Plain(value),
                slot: Slot::Pending,
            });
        }
        Ok(())
    }

    fn variable_value(&mut self, index: usize) -> Result<Value, ArmError> {
        match &self.variables[index].slot {
            Slot::Done(value) => return Ok(value.clone()),
            Slot::Busy => {
                return Err(ArmError::invalid_template(format!(
                    "The variable '{}' refers to itself (circular reference)",
                    self.variables[index].name
                )));
            }
            Slot::Pending => {}
        }
        self.variables[index].slot = Slot::Busy;
        let at = format!("variables.{}", self.variables[index].name);
        let result = match self.variables[index].source {
            VariableSource::Plain(value) => self.eval_value(value, &at),
            VariableSource::Copy(entry) => self.copy_array(entry, &at),
        };
        self.variables[index].slot = match &result {
            Ok(value) => Slot::Done(value.clone()),
            Err(_) => Slot::Pending,
        };
        result
    }

    fn declare_functions(&mut self) -> Result<(), ArmError> {
        let Some(namespaces) = self.template.get("functions").filter(|v| !v.is_null()) else {
            return Ok(());
        };
        let Value::Array(namespaces) = namespaces else {
            return Err(ArmError::invalid_template(
                "The template's 'functions' must be an array of namespaces",
            ));
        };
        for namespace in namespaces {
            let namespace = object(namespace, "A 'functions' namespace")?;
            let prefix = namespace
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_ascii_lowercase();
            if let Some(members) = namespace.get("members") {
                for (name, member) in object(members, "A namespace's 'members'")? {
                    let member = object(member, &format!("The function '{name}'"))?;
                    self.functions
                        .insert(format!("{prefix}.{}", name.to_ascii_lowercase()), member);
                }
            }
        }
        Ok(())
    }

    fn call_user_function(
        &mut self,
        namespace: &str,
        name: &str,
        args: Vec<Value>,
    ) -> Result<Value, ArmError> {
        let key = format!(
            "{}.{}",
            namespace.to_ascii_lowercase(),
            name.to_ascii_lowercase()
        );
        let Some(member) = self.functions.get(&key).copied() else {
            return Err(ArmError::invalid_template(format!(
                "The template function '{namespace}.{name}' is not defined in the template"
            )));
        };
        let declared: Vec<&str> = member
            .get("parameters")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|p| p.get("name").and_then(Value::as_str))
                    .collect()
            })
            .unwrap_or_default();
        if declared.len() != args.len() {
            return Err(ArmError::invalid_template(format!(
                "The template function '{namespace}.{name}' expects {} argument(s) but got {}",
                declared.len(),
                args.len()
            )));
        }
        if self.function_frames.len() > 32 {
            return Err(ArmError::invalid_template(format!(
                "The template function '{namespace}.{name}' recurses too deeply"
            )));
        }
        let output = member
            .get("output")
            .and_then(|o| o.get("value"))
            .ok_or_else(|| {
                ArmError::invalid_template(format!(
                    "The template function '{namespace}.{name}' has no output value"
                ))
            })?;
        let frame = declared
            .iter()
            .map(|n| n.to_ascii_lowercase())
            .zip(args)
            .collect();
        self.function_frames.push(frame);
        let saved_copies = std::mem::take(&mut self.copy_frames);
        let result = self.eval_value(output, &format!("functions.{namespace}.{name}"));
        self.copy_frames = saved_copies;
        self.function_frames.pop();
        result
    }

    // ----- resources ----------------------------------------------------

    fn declare_resources(&mut self) -> Result<(), ArmError> {
        let declarations: Vec<(String, String, &'a Map<String, Value>)> =
            match self.template.get("resources") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Object(map)) => map
                    .iter()
                    .map(|(symbol, d)| {
                        object(d, &format!("The resource '{symbol}'"))
                            .map(|d| (symbol.clone(), format!("resources.{symbol}"), d))
                    })
                    .collect::<Result<_, _>>()?,
                Some(Value::Array(list)) => list
                    .iter()
                    .enumerate()
                    .map(|(i, d)| {
                        object(d, &format!("resources[{i}]"))
                            .map(|d| (String::new(), format!("resources[{i}]"), d))
                    })
                    .collect::<Result<_, _>>()?,
                Some(other) => {
                    return Err(ArmError::invalid_template(format!(
                        "The template's 'resources' must be an object or an array but is {}",
                        type_name(other)
                    )));
                }
            };
        for (symbol, location, declaration) in declarations {
            self.declare_resource(symbol, location, declaration)?;
        }
        // Conditions may use anything declared, so they come after all
        // instances exist.
        for index in 0..self.instances.len() {
            let declaration = self.instances[index].declaration;
            if let Some(condition) = declaration.get("condition") {
                let location = format!("{}.condition", self.instances[index].location);
                let copy = self.instances[index].copy.clone();
                let value = self.with_copy(copy, |this| this.eval_value(condition, &location))?;
                match value {
                    Value::Bool(deployed) => self.instances[index].deployed = deployed,
                    other => {
                        return Err(ArmError::invalid_template(format!(
                            "The condition of resource '{}' must be a boolean but is {}",
                            self.instances[index].instance_name,
                            type_name(&other)
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn declare_resource(
        &mut self,
        symbol: String,
        location: String,
        declaration: &'a Map<String, Value>,
    ) -> Result<(), ArmError> {
        let module = template_type(declaration).as_deref() == Some(DEPLOYMENTS_TYPE)
            && declaration.get("existing") != Some(&Value::Bool(true));
        if module {
            // Bicep writes these for a module with `scope:`; its resources
            // would go to another resource group or subscription.
            for unsupported in ["scope", "subscriptionId", "resourceGroup"] {
                if declaration.contains_key(unsupported) {
                    return Err(ArmError::invalid_template(format!(
                        "The module '{location}' (a nested Microsoft.Resources/deployments) sets '{unsupported}', which the Radius simulator does not support: a module deploys into the scope of the template that declares it"
                    )));
                }
            }
        }
        for unsupported in ["scope", "subscriptionId"] {
            if declaration.contains_key(unsupported) {
                return Err(ArmError::invalid_template(format!(
                    "The resource '{location}' uses '{unsupported}', which the Radius simulator does not support"
                )));
            }
        }
        if declaration
            .get("resources")
            .and_then(Value::as_array)
            .is_some_and(|children| !children.is_empty())
        {
            return Err(ArmError::invalid_template(format!(
                "The resource '{location}' declares nested child 'resources', which the Radius simulator does not support; declare them at the top level"
            )));
        }
        if template_type(declaration).is_none() {
            return Err(ArmError::invalid_template(format!(
                "The resource '{location}' has no 'type'"
            )));
        }
        let extensible =
            declaration.contains_key("import") || declaration.contains_key("extension");
        let existing = match declaration.get("existing") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(existing)) => *existing,
            Some(other) => {
                return Err(ArmError::invalid_template(format!(
                    "'existing' of resource '{location}' must be a boolean but is {}",
                    type_name(other)
                )));
            }
        };
        let display = if symbol.is_empty() {
            location.clone()
        } else {
            symbol.clone()
        };
        let copies = match declaration.get("copy") {
            None | Some(Value::Null) => None,
            Some(copy) => {
                let copy = object(copy, &format!("'copy' of resource '{location}'"))?;
                let loop_name = copy
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or(&display)
                    .to_string();
                let count = copy.get("count").ok_or_else(|| {
                    ArmError::invalid_template(format!(
                        "'copy' of resource '{location}' has no 'count'"
                    ))
                })?;
                let count = self.eval_value(count, &format!("{location}.copy.count"))?;
                let count = count.as_u64().filter(|c| *c <= 800).ok_or_else(|| {
                    ArmError::invalid_template(format!(
                        "'copy.count' of resource '{location}' must be an integer from 0 to 800"
                    ))
                })?;
                Some((loop_name, count as usize))
            }
        };
        let base = Instance {
            symbol: symbol.clone(),
            instance_name: display.clone(),
            declaration,
            location: location.clone(),
            copy: None,
            extensible,
            existing,
            module,
            deployed: true,
            identity: None,
            identity_busy: false,
            body: Slot::Pending,
            references: BTreeSet::new(),
            nested: None,
        };
        match copies {
            None => {
                let index = self.instances.len();
                self.instances.push(base);
                self.add_symbol(&display, index);
            }
            Some((loop_name, count)) => {
                for i in 0..count {
                    let index = self.instances.len();
                    let instance_name = format!("{display}[{i}]");
                    self.instances.push(Instance {
                        instance_name: instance_name.clone(),
                        location: format!("{location}[{i}]"),
                        copy: Some(CopyFrame {
                            name: Some(loop_name.clone()),
                            index: i,
                        }),
                        symbol: symbol.clone(),
                        declaration,
                        extensible,
                        existing,
                        module,
                        deployed: true,
                        identity: None,
                        identity_busy: false,
                        body: Slot::Pending,
                        references: BTreeSet::new(),
                        nested: None,
                    });
                    self.add_symbol(&instance_name, index);
                    self.add_symbol(&display, index);
                    if !loop_name.eq_ignore_ascii_case(&display) {
                        self.add_symbol(&loop_name, index);
                    }
                }
                // An empty loop still is a known name for dependsOn.
                self.symbols
                    .entry(display.to_ascii_lowercase())
                    .or_default();
                self.symbols
                    .entry(loop_name.to_ascii_lowercase())
                    .or_default();
            }
        }
        Ok(())
    }

    fn add_symbol(&mut self, name: &str, index: usize) {
        self.symbols
            .entry(name.to_ascii_lowercase())
            .or_default()
            .push(index);
    }

    fn with_copy<T>(
        &mut self,
        frame: Option<CopyFrame>,
        run: impl FnOnce(&mut Self) -> Result<T, ArmError>,
    ) -> Result<T, ArmError> {
        let saved = std::mem::take(&mut self.copy_frames);
        let saved_functions = std::mem::take(&mut self.function_frames);
        if let Some(frame) = frame {
            self.copy_frames.push(frame);
        }
        let result = run(self);
        self.copy_frames = saved;
        self.function_frames = saved_functions;
        result
    }

    /// Name, type and id of an instance.
    fn identity(&mut self, index: usize) -> Result<Identity, ArmError> {
        if let Some(identity) = &self.instances[index].identity {
            return Ok(identity.clone());
        }
        if self.instances[index].identity_busy {
            return Err(ArmError::invalid_template(format!(
                "The name of resource '{}' depends on itself (circular reference)",
                self.instances[index].instance_name
            )));
        }
        self.instances[index].identity_busy = true;
        let copy = self.instances[index].copy.clone();
        let result = self.with_copy(copy, |this| this.compute_identity(index));
        self.instances[index].identity_busy = false;
        let identity = result?;
        let instance = &mut self.instances[index];
        if instance.symbol.is_empty() {
            instance.instance_name = identity.name.clone();
        }
        instance.identity = Some(identity.clone());
        Ok(identity)
    }

    fn compute_identity(&mut self, index: usize) -> Result<Identity, ArmError> {
        let declaration = self.instances[index].declaration;
        let location = self.instances[index].location.clone();
        let raw_type = declaration
            .get("type")
            .map(|t| self.eval_value(t, &format!("{location}.type")))
            .transpose()?
            .and_then(|t| t.as_str().map(str::to_string))
            .ok_or_else(|| {
                ArmError::invalid_template(format!(
                    "The resource '{location}' has no string 'type'"
                ))
            })?;
        let (resource_type, mut api_version) = match raw_type.split_once('@') {
            Some((t, v)) => (t.to_string(), Some(v.to_string())),
            None => (raw_type.clone(), None),
        };
        if let Some(version) = declaration.get("apiVersion").and_then(Value::as_str) {
            api_version = Some(version.to_string());
        }
        let name_value = if self.instances[index].extensible {
            declaration
                .get("properties")
                .and_then(|p| p.get("name"))
                .map(|n| self.eval_value(n, &format!("{location}.properties.name")))
                .transpose()?
        } else {
            declaration
                .get("name")
                .map(|n| self.eval_value(n, &format!("{location}.name")))
                .transpose()?
        };
        let name = match name_value {
            Some(Value::String(name)) if !name.is_empty() => name,
            Some(other) => {
                return Err(ArmError::invalid_template(format!(
                    "The name of resource '{location}' must be a non-empty string but is {}",
                    type_name(&other)
                )));
            }
            None => {
                let field = if self.instances[index].extensible {
                    "properties.name"
                } else {
                    "name"
                };
                return Err(ArmError::invalid_template(format!(
                    "The resource '{location}' has no '{field}'"
                )));
            }
        };
        let scope = match declaration.get("resourceGroup") {
            None | Some(Value::Null) => self.scope.clone(),
            Some(group) => {
                let group = self.eval_value(group, &format!("{location}.resourceGroup"))?;
                let group = group.as_str().ok_or_else(|| {
                    ArmError::invalid_template(format!(
                        "'resourceGroup' of resource '{location}' must be a string"
                    ))
                })?;
                let (plane, _) = ids::resource_group_of(&self.scope).ok_or_else(|| {
                    ArmError::invalid_template(format!(
                        "The resource '{location}' names a resource group but the deployment scope '{}' is not in one",
                        self.scope
                    ))
                })?;
                ids::resource_group_id(&plane, group)
            }
        };
        let names: Vec<String> = name.split('/').map(str::to_string).collect();
        let id = ids::resource_id(&scope, &resource_type, &names).map_err(|e| {
            ArmError::invalid_template(format!("The resource '{location}' has no valid id: {e}"))
        })?;
        Ok(Identity {
            name,
            resource_type,
            api_version,
            id,
        })
    }

    fn check_duplicates(&mut self) -> Result<(), ArmError> {
        let mut seen: HashMap<String, String> = HashMap::new();
        for instance in self.instances.iter().filter(|i| i.deployed && !i.existing) {
            let Some(identity) = &instance.identity else {
                continue;
            };
            if let Some(first) = seen.insert(ids::key(&identity.id), instance.instance_name.clone())
            {
                return Err(ArmError::invalid_template(format!(
                    "The resource '{}' is defined multiple times in the template (by '{first}' and '{}')",
                    identity.id, instance.instance_name
                )));
            }
        }
        Ok(())
    }

    /// The evaluated body sent to the provider.
    fn body(&mut self, index: usize) -> Result<Value, ArmError> {
        match &self.instances[index].body {
            Slot::Done(body) => return Ok(body.clone()),
            Slot::Busy => {
                return Err(ArmError::invalid_template(format!(
                    "Circular dependency detected on resource: '{}' refers to itself through reference()",
                    self.instances[index].instance_name
                )));
            }
            Slot::Pending => {}
        }
        let identity = self.identity(index)?;
        self.instances[index].body = Slot::Busy;
        self.evaluating.push(index);
        let copy = self.instances[index].copy.clone();
        let result = self
            .with_copy(copy, |this| this.compute_body(index, &identity))
            .and_then(|body| self.produce(body, "a resource body"));
        self.evaluating.pop();
        self.instances[index].body = match &result {
            Ok(body) => Slot::Done(body.clone()),
            Err(_) => Slot::Pending,
        };
        result
    }

    fn compute_body(&mut self, index: usize, identity: &Identity) -> Result<Value, ArmError> {
        if self.instances[index].module {
            return self.compute_module(index, identity);
        }
        let declaration = self.instances[index].declaration;
        let location = self.instances[index].location.clone();
        let mut body = if self.instances[index].extensible {
            match declaration.get("properties") {
                Some(properties) => {
                    let at = format!("{location}.properties");
                    match self.eval_value(properties, &at)? {
                        Value::Object(map) => map,
                        other => {
                            return Err(ArmError::invalid_template(format!(
                                "'properties' of resource '{location}' must be an object but is {}",
                                type_name(&other)
                            )));
                        }
                    }
                }
                None => Map::new(),
            }
        } else {
            let mut map = Map::new();
            for (key, value) in declaration {
                if TEMPLATE_ONLY_KEYS.contains(&key.as_str()) {
                    continue;
                }
                map.insert(
                    key.clone(),
                    self.eval_value(value, &format!("{location}.{key}"))?,
                );
            }
            map
        };
        body.insert("name".into(), Value::String(identity.name.clone()));
        Ok(Value::Object(body))
    }

    /// Evaluate a module: its parameters here, its template by an evaluator
    /// of its own. The body is the deployment as ARM reports it once it has
    /// succeeded, so `reference()` finds `outputs` in its properties.
    fn compute_module(&mut self, index: usize, identity: &Identity) -> Result<Value, ArmError> {
        let declaration = self.instances[index].declaration;
        let location = self.instances[index].location.clone();
        let module = self.instances[index].instance_name.clone();
        let properties = match declaration.get("properties") {
            Some(Value::Object(properties)) => properties,
            _ => {
                return Err(ArmError::invalid_template(format!(
                    "The module '{module}' (at {location}) has no 'properties' object"
                )));
            }
        };
        for unsupported in UNSUPPORTED_MODULE_PROPERTIES {
            if properties.contains_key(*unsupported) {
                return Err(ArmError::invalid_template(format!(
                    "The module '{module}' uses 'properties.{unsupported}', which the Radius simulator does not support; Bicep compiles a module to an inline 'properties.template'"
                )));
            }
        }
        let evaluation_scope = match properties
            .get("expressionEvaluationOptions")
            .and_then(|options| options.get("scope"))
        {
            Some(scope) => self.eval_value(
                scope,
                &format!("{location}.properties.expressionEvaluationOptions.scope"),
            )?,
            None => Value::Null,
        };
        if !evaluation_scope
            .as_str()
            .is_some_and(|scope| scope.eq_ignore_ascii_case("inner"))
        {
            return Err(ArmError::invalid_template(format!(
                "The module '{module}' is evaluated in the '{}' scope, which the Radius simulator does not support; set 'properties.expressionEvaluationOptions.scope' to 'inner' (as Bicep does)",
                evaluation_scope.as_str().unwrap_or("outer")
            )));
        }
        if let Some(mode) = properties.get("mode") {
            let mode = self.eval_value(mode, &format!("{location}.properties.mode"))?;
            if !mode
                .as_str()
                .is_some_and(|mode| mode.eq_ignore_ascii_case("Incremental"))
            {
                return Err(ArmError::invalid_template(format!(
                    "The module '{module}' has the deployment mode '{}'; the Radius simulator supports only 'Incremental'",
                    stringify(&mode)
                )));
            }
        }
        let template = properties
            .get("template")
            .filter(|template| template.is_object())
            .ok_or_else(|| {
                ArmError::invalid_template(format!(
                    "The module '{module}' has no inline template: 'properties.template' must be a JSON object"
                ))
            })?;
        let parameters = match properties.get("parameters") {
            Some(parameters) => {
                self.eval_value(parameters, &format!("{location}.properties.parameters"))?
            }
            None => Value::Null,
        };
        // `existing` resources of the module may be ones this template
        // deploys before the module starts; those are found as planned.
        let mut planned: HashMap<String, Value> = HashMap::new();
        for before in self.deployed_before(index)? {
            if let Some(nested) = &self.instances[before].nested {
                for resource in nested.resources.iter().filter(|r| !r.existing) {
                    let state = provider_state(
                        &resource.id,
                        &resource.name,
                        &resource.resource_type,
                        resource.api_version.as_deref(),
                        resource.body.clone(),
                    );
                    planned.insert(ids::key(&resource.id), state);
                }
            } else if !self.instances[before].existing {
                let state = self.runtime_state(before)?;
                let id = self.identity(before)?.id;
                planned.insert(ids::key(&id), state);
            }
        }
        let outer = self.existing;
        let lookup = |id: &str| {
            planned
                .get(&ids::key(id))
                .cloned()
                .or_else(|| outer.and_then(|lookup| lookup(id)))
        };
        let request = EvaluationRequest {
            scope: &self.scope,
            template,
            parameters: &parameters,
            deployment_name: &identity.name,
            existing: Some(&lookup),
        };
        let mut produced = self.produced;
        let nested = Evaluator::run_nested(&request, self.nesting, &mut produced);
        self.produced = produced;
        let nested = nested.map_err(|mut error| {
            error.message = format!("In module '{module}': {}", error.message);
            error
        })?;
        let output_resources: Vec<Value> = nested
            .output_resource_ids()
            .into_iter()
            .map(|id| serde_json::json!({ "id": id }))
            .collect();
        let body = serde_json::json!({
            "name": identity.name,
            "properties": {
                "mode": "Incremental",
                "parameters": parameters,
                "outputs": nested.outputs,
                "outputResources": output_resources,
                "provisioningState": "Succeeded",
            },
        });
        self.instances[index].nested = Some(nested);
        Ok(body)
    }

    /// What `reference()` on an instance sees: the resource as its provider
    /// returns it (`{"id", "name", "type", "properties": {...}}`).
    fn runtime_state(&mut self, index: usize) -> Result<Value, ArmError> {
        let identity = self.identity(index)?;
        if self.instances[index].existing
            && let Some(lookup) = self.existing
            && let Some(found) = lookup(&identity.id)
        {
            return Ok(found);
        }
        if !self.instances[index].deployed {
            return Err(ArmError::invalid_template(format!(
                "The resource '{}' is not deployed because its condition is false, so it cannot be referenced",
                self.instances[index].instance_name
            )));
        }
        let body = self.body(index)?;
        Ok(provider_state(
            &identity.id,
            &identity.name,
            &identity.resource_type,
            identity.api_version.as_deref(),
            body,
        ))
    }

    /// The deployed instances that are done before `index` starts: its
    /// dependencies and theirs. Evaluates their bodies (which is where
    /// implicit dependencies are found).
    fn deployed_before(&mut self, index: usize) -> Result<BTreeSet<usize>, ArmError> {
        let mut found = BTreeSet::new();
        let mut pending: Vec<usize> = self.dependencies(index)?.into_iter().collect();
        while let Some(next) = pending.pop() {
            if next == index || !found.insert(next) {
                continue;
            }
            self.body(next)?;
            pending.extend(self.dependencies(next)?);
        }
        Ok(found)
    }

    /// Instances a `dependsOn` entry or `reference()` argument names:
    /// symbolic name, instance name (`env[1]`), copy loop name, resource id
    /// (full, or `Namespace/type/name`), or resource name.
    fn resolve(&mut self, target: &str) -> Result<Vec<usize>, ArmError> {
        if let Some(found) = self.symbols.get(&target.to_ascii_lowercase()) {
            return Ok(found.clone());
        }
        let wanted = ids::key(target);
        let mut by_id = Vec::new();
        let mut by_name = Vec::new();
        for index in 0..self.instances.len() {
            let identity = self.identity(index)?;
            let id = ids::key(&identity.id);
            if id == wanted
                || (!wanted.starts_with('/') && id.ends_with(&format!("/providers/{wanted}")))
            {
                by_id.push(index);
            } else if identity.name.eq_ignore_ascii_case(target) {
                by_name.push(index);
            }
        }
        Ok(if by_id.is_empty() { by_name } else { by_id })
    }

    fn resolve_one(&mut self, function: &str, target: &str) -> Result<usize, ArmError> {
        let found = self.resolve(target)?;
        match found.as_slice() {
            [one] => Ok(*one),
            [] => Err(ArmError::invalid_template(format!(
                "The template function '{function}' names the resource '{target}', which is not defined in the template"
            ))),
            _ => Err(ArmError::invalid_template(format!(
                "The template function '{function}' names '{target}', which is a collection of {} resources; index it like '{target}[0]'",
                found.len()
            ))),
        }
    }

    fn note_reference(&mut self, index: usize) {
        if let Some(&from) = self.evaluating.last()
            && from != index
        {
            self.instances[from].references.insert(index);
        }
    }

    /// The deployed instances one instance waits for: its `dependsOn`
    /// entries and the resources its body references.
    fn dependencies(&mut self, index: usize) -> Result<BTreeSet<usize>, ArmError> {
        if !self.instances[index].deployed {
            return Ok(BTreeSet::new());
        }
        let declaration = self.instances[index].declaration;
        let location = self.instances[index].location.clone();
        let mut depends: BTreeSet<usize> = self.instances[index].references.clone();
        match declaration.get("dependsOn") {
            None | Some(Value::Null) => {}
            Some(Value::Array(entries)) => {
                for (at, entry) in entries.iter().enumerate() {
                    let entry_at = format!("{location}.dependsOn[{at}]");
                    let copy = self.instances[index].copy.clone();
                    let target = self.with_copy(copy, |this| this.eval_value(entry, &entry_at))?;
                    let Value::String(target) = target else {
                        return Err(ArmError::invalid_template(format!(
                            "{entry_at} must be a string but is {}",
                            type_name(&target)
                        )));
                    };
                    let found = self.resolve(&target)?;
                    if found.is_empty() && !self.symbols.contains_key(&target.to_ascii_lowercase())
                    {
                        return Err(ArmError::invalid_template(format!(
                            "The resource '{target}' is not defined in the template (at {entry_at})"
                        )));
                    }
                    depends.extend(found);
                }
            }
            Some(other) => {
                return Err(ArmError::invalid_template(format!(
                    "'dependsOn' of resource '{location}' must be an array but is {}",
                    type_name(other)
                )));
            }
        }
        depends.remove(&index);
        Ok(depends
            .into_iter()
            .filter(|d| self.instances[*d].deployed)
            .collect())
    }

    /// Dependency order of the deployed instances (declaration order among
    /// the independent ones). A cycle is an error naming its members.
    fn order(&mut self) -> Result<Vec<usize>, ArmError> {
        let count = self.instances.len();
        let edges = (0..count)
            .map(|index| self.dependencies(index))
            .collect::<Result<Vec<_>, _>>()?;
        let mut remaining: BTreeSet<usize> =
            (0..count).filter(|i| self.instances[*i].deployed).collect();
        let mut order = Vec::new();
        while !remaining.is_empty() {
            let ready: Vec<usize> = remaining
                .iter()
                .copied()
                .filter(|i| edges[*i].iter().all(|d| !remaining.contains(d)))
                .collect();
            if ready.is_empty() {
                let names: Vec<String> = remaining
                    .iter()
                    .map(|i| self.instances[*i].instance_name.clone())
                    .collect();
                return Err(ArmError::invalid_template(format!(
                    "Circular dependency detected on resources: '{}'",
                    names.join("', '")
                )));
            }
            for index in ready {
                remaining.remove(&index);
                order.push(index);
            }
        }
        // Store the edges for the results.
        for (index, deps) in edges.into_iter().enumerate() {
            self.instances[index].references = deps;
        }
        Ok(order)
    }

    fn outputs(&mut self) -> Result<Map<String, Value>, ArmError> {
        let mut out = Map::new();
        let Some(outputs) = self.template.get("outputs").filter(|o| !o.is_null()) else {
            return Ok(out);
        };
        for (name, output) in object(outputs, "The template's 'outputs'")? {
            let output = object(output, &format!("The output '{name}'"))?;
            if let Some(condition) = output.get("condition")
                && self.eval_value(condition, &format!("outputs.{name}.condition"))?
                    == Value::Bool(false)
            {
                continue;
            }
            let value = match (output.get("copy"), output.get("value")) {
                (Some(copy), _) => self.output_copy(name, copy)?,
                (None, Some(value)) => self.eval_value(value, &format!("outputs.{name}.value"))?,
                (None, None) => Value::Null,
            };
            let mut entry = Map::new();
            if let Some(t) = output.get("type") {
                entry.insert("type".into(), t.clone());
            }
            entry.insert("value".into(), value);
            out.insert(name.clone(), Value::Object(entry));
        }
        Ok(out)
    }

    /// An output with `copy` (`{"count", "input"}`): an array of `count`
    /// evaluations of `input`, with `copyIndex()` counting.
    fn output_copy(&mut self, name: &str, copy: &Value) -> Result<Value, ArmError> {
        let at = format!("outputs.{name}.copy");
        let copy = object(copy, &format!("'copy' of output '{name}'"))?;
        let count = copy.get("count").ok_or_else(|| {
            ArmError::invalid_template(format!("'copy' of output '{name}' has no 'count'"))
        })?;
        let count = self.eval_value(count, &format!("{at}.count"))?;
        let count = count.as_u64().filter(|c| *c <= 800).ok_or_else(|| {
            ArmError::invalid_template(format!(
                "'copy.count' of output '{name}' must be an integer from 0 to 800"
            ))
        })?;
        let input = copy.get("input").ok_or_else(|| {
            ArmError::invalid_template(format!("'copy' of output '{name}' has no 'input'"))
        })?;
        let mut items = Vec::new();
        for index in 0..count as usize {
            let frame = Some(CopyFrame { name: None, index });
            let at = format!("{at}.input[{index}]");
            let item = self.with_copy(frame, |this| this.eval_value(input, &at))?;
            items.push(self.produce(item, &at)?);
        }
        Ok(Value::Array(items))
    }

    /// The resources in deployment order, with each module replaced by what
    /// it deploys, and the modules themselves.
    fn results(&self, order: &[usize]) -> (Vec<EvaluatedResource>, Vec<ModuleDeployment>) {
        let position: HashMap<usize, usize> = order
            .iter()
            .enumerate()
            .map(|(at, index)| (*index, at))
            .collect();
        let mut resources = Vec::new();
        let mut modules = Vec::new();
        for &index in order {
            let instance = &self.instances[index];
            let Some(identity) = instance.identity.as_ref() else {
                continue;
            };
            let mut depends: Vec<usize> = instance.references.iter().copied().collect();
            depends.sort_by_key(|d| position.get(d).copied().unwrap_or(usize::MAX));
            let depends_on: Vec<String> =
                depends.iter().flat_map(|d| self.deployed_ids(*d)).collect();
            let body = match &instance.body {
                Slot::Done(body) => body.clone(),
                _ => Value::Null,
            };
            let Some(nested) = &instance.nested else {
                resources.push(EvaluatedResource {
                    symbolic_name: instance.instance_name.clone(),
                    id: identity.id.clone(),
                    name: identity.name.clone(),
                    resource_type: identity.resource_type.clone(),
                    api_version: identity.api_version.clone(),
                    existing: instance.existing,
                    body,
                    depends_on,
                    module_path: Vec::new(),
                });
                continue;
            };
            // The module's deployment starts once what it waits for is done,
            // so each of its resources waits for that too.
            for resource in &nested.resources {
                let mut resource = resource.clone();
                resource.module_path.insert(0, identity.name.clone());
                let mut waits_for = depends_on.clone();
                for id in resource.depends_on {
                    if !waits_for.contains(&id) {
                        waits_for.push(id);
                    }
                }
                resource.depends_on = waits_for;
                resources.push(resource);
            }
            modules.push(ModuleDeployment {
                symbolic_name: instance.instance_name.clone(),
                id: identity.id.clone(),
                name: identity.name.clone(),
                path: vec![identity.name.clone()],
                parameters: body
                    .pointer("/properties/parameters")
                    .cloned()
                    .unwrap_or(Value::Null),
                outputs: nested.outputs.clone(),
                output_resources: nested.output_resource_ids(),
            });
            for inner in &nested.modules {
                let mut inner = inner.clone();
                inner.path.insert(0, identity.name.clone());
                modules.push(inner);
            }
        }
        (resources, modules)
    }

    /// The ids an instance stands for in `depends_on`: its own, or for a
    /// module the resources it deploys.
    fn deployed_ids(&self, index: usize) -> Vec<String> {
        let instance = &self.instances[index];
        match (&instance.nested, &instance.identity) {
            (Some(nested), _) => nested.output_resource_ids(),
            (None, Some(identity)) => vec![identity.id.clone()],
            (None, None) => Vec::new(),
        }
    }

    // ----- values and expressions ----------------------------------------

    /// Evaluate every expression inside a JSON value. `at` names the place
    /// for error messages.
    fn eval_value(&mut self, value: &Value, at: &str) -> Result<Value, ArmError> {
        // Every recursion of the evaluator (JSON nesting, and each variable,
        // parameter, resource or function an expression leads to) passes
        // here; a bound turns a hostile chain into an error, not a stack
        // overflow that aborts the process.
        if self.nesting >= MAX_NESTING {
            return Err(ArmError::invalid_template(format!(
                "The template nests values, expressions, variables, parameters, functions or references more than {MAX_NESTING} levels deep (at {at})"
            )));
        }
        self.nesting += 1;
        let result = self.eval_value_at(value, at);
        self.nesting -= 1;
        result
    }

    fn eval_value_at(&mut self, value: &Value, at: &str) -> Result<Value, ArmError> {
        match value {
            Value::String(text) => self.eval_string(text).map_err(|e| e.at(at)),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| self.eval_value(item, &format!("{at}[{i}]")))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, item) in map {
                    if key == "copy"
                        && let Value::Array(entries) = item
                        && entries.iter().all(is_copy_entry)
                    {
                        for entry in entries {
                            let entry = object(entry, &format!("{at}.copy entry"))?;
                            let name =
                                entry.get("name").and_then(Value::as_str).ok_or_else(|| {
                                    ArmError::invalid_template(format!(
                                        "A 'copy' entry at {at} has no 'name'"
                                    ))
                                })?;
                            let items = self.copy_array(entry, &format!("{at}.{name}"))?;
                            out.insert(name.to_string(), items);
                        }
                        continue;
                    }
                    out.insert(key.clone(), self.eval_value(item, &format!("{at}.{key}"))?);
                }
                Ok(Value::Object(out))
            }
            other => Ok(other.clone()),
        }
    }

    /// `{"name", "count", "input"}`: an array of `count` evaluations of
    /// `input`, with `copyIndex('name')` counting.
    fn copy_array(&mut self, entry: &Map<String, Value>, at: &str) -> Result<Value, ArmError> {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let count = match entry.get("count") {
            Some(count) => self.eval_value(count, &format!("{at}.count"))?,
            None => {
                return Err(ArmError::invalid_template(format!(
                    "The copy loop '{name}' has no 'count' (at {at})"
                )));
            }
        };
        let count = count.as_u64().filter(|c| *c <= 800).ok_or_else(|| {
            ArmError::invalid_template(format!(
                "The 'count' of copy loop '{name}' must be an integer from 0 to 800 (at {at})"
            ))
        })?;
        let input = entry.get("input").ok_or_else(|| {
            ArmError::invalid_template(format!("The copy loop '{name}' has no 'input' (at {at})"))
        })?;
        let mut items = Vec::new();
        for index in 0..count as usize {
            self.copy_frames.push(CopyFrame {
                name: Some(name.clone()),
                index,
            });
            let item = self.eval_value(input, &format!("{at}[{index}]"));
            self.copy_frames.pop();
            items.push(self.produce(item?, at)?);
        }
        Ok(Value::Array(items))
    }

    fn eval_string(&mut self, text: &str) -> Result<Value, ArmError> {
        match parse_template_string(text)? {
            TemplateString::Literal(literal) => Ok(Value::String(literal)),
            TemplateString::Expression(expr) => self.eval_expr(&expr),
        }
    }

    fn eval_expr(&mut self, expr: &Expr) -> Result<Value, ArmError> {
        if self.nesting >= MAX_NESTING {
            return Err(ArmError::invalid_template(format!(
                "The template nests values, expressions, variables, parameters, functions or references more than {MAX_NESTING} levels deep"
            )));
        }
        self.nesting += 1;
        let result = self.eval_expr_nested(expr);
        self.nesting -= 1;
        self.produce(result?, "an expression")
    }

    /// Count `value` against [`MAX_PRODUCED`].
    fn produce(&mut self, value: Value, at: &str) -> Result<Value, ArmError> {
        self.produced = self.produced.saturating_add(weight(&value));
        if self.produced > MAX_PRODUCED {
            return Err(ArmError::invalid_template(format!(
                "The template's expressions and copy loops produce more than {} MiB of values (at {at})",
                MAX_PRODUCED >> 20
            )));
        }
        Ok(value)
    }

    fn eval_expr_nested(&mut self, expr: &Expr) -> Result<Value, ArmError> {
        match expr {
            Expr::String(text) => Ok(Value::String(text.clone())),
            Expr::Int(value) => Ok(Value::from(*value)),
            Expr::Property { target, name } => {
                let value = self.eval_expr(target)?;
                property(&value, name)
            }
            Expr::Index { target, index } => {
                let value = self.eval_expr(target)?;
                let index = self.eval_expr(index)?;
                index_into(&value, &index)
            }
            Expr::Call {
                namespace: Some(namespace),
                name,
                args,
            } => {
                let args = self.eval_args(args)?;
                self.call_user_function(namespace, name, args)
            }
            Expr::Call {
                namespace: None,
                name,
                args,
            } => self.call(name, args),
        }
    }

    fn eval_args(&mut self, args: &[Expr]) -> Result<Vec<Value>, ArmError> {
        args.iter().map(|a| self.eval_expr(a)).collect()
    }

    fn call(&mut self, name: &str, args: &[Expr]) -> Result<Value, ArmError> {
        let lower = name.to_ascii_lowercase();
        if lower == "if" {
            // Only the chosen branch is evaluated, as in ARM.
            if args.len() != 3 {
                return Err(ArmError::invalid_template(format!(
                    "Unable to evaluate template language function 'if': expects 3 arguments but got {}",
                    args.len()
                )));
            }
            return match self.eval_expr(&args[0])? {
                Value::Bool(true) => self.eval_expr(&args[1]),
                Value::Bool(false) => self.eval_expr(&args[2]),
                other => Err(ArmError::invalid_template(format!(
                    "Unable to evaluate template language function 'if': the condition must be a boolean but is {}",
                    type_name(&other)
                ))),
            };
        }
        let values = self.eval_args(args)?;
        match lower.as_str() {
            "parameters" => self.fn_parameters(&values),
            "variables" => self.fn_variables(&values),
            "reference" => self.fn_reference(&values),
            "resourceinfo" => self.fn_resource_info(&values),
            "resourceid" => self.fn_resource_id(&values),
            "copyindex" => self.fn_copy_index(&values),
            "resourcegroup" => self.fn_resource_group(&values),
            "deployment" => self.fn_deployment(&values),
            _ => functions::call(&lower, &values).unwrap_or_else(|| {
                Err(ArmError::invalid_template(format!(
                    "The template function '{name}' is not valid or not supported by the Radius simulator"
                )))
            }),
        }
    }

    fn fn_parameters(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("parameters", args, 1, 1)?;
        let name = functions::string_arg("parameters", args, 0)?;
        if let Some(frame) = self.function_frames.last() {
            return frame
                .get(&name.to_ascii_lowercase())
                .cloned()
                .ok_or_else(|| {
                    ArmError::invalid_template(format!(
                        "The function parameter '{name}' is not defined"
                    ))
                });
        }
        let index = self
            .parameters
            .iter()
            .position(|p| p.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                ArmError::invalid_template(format!("The template parameter '{name}' is not found"))
            })?;
        self.parameter_value(index)
    }

    fn fn_variables(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("variables", args, 1, 1)?;
        let name = functions::string_arg("variables", args, 0)?;
        if !self.function_frames.is_empty() {
            return Err(ArmError::invalid_template(format!(
                "The template function 'variables' cannot be used inside a user-defined function (variable '{name}')"
            )));
        }
        let index = self
            .variables
            .iter()
            .position(|v| v.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                ArmError::invalid_template(format!("The template variable '{name}' is not found"))
            })?;
        self.variable_value(index)
    }

    fn fn_reference(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("reference", args, 1, 3)?;
        let target = functions::string_arg("reference", args, 0)?;
        let full = args
            .get(2)
            .and_then(Value::as_str)
            .is_some_and(|mode| mode.eq_ignore_ascii_case("full"));
        let index = self.resolve_one("reference", target)?;
        self.note_reference(index);
        let state = self.runtime_state(index)?;
        if full || self.instances[index].extensible {
            Ok(state)
        } else {
            Ok(state
                .get("properties")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())))
        }
    }

    fn fn_resource_info(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("resourceInfo", args, 1, 1)?;
        let target = functions::string_arg("resourceInfo", args, 0)?;
        let index = self.resolve_one("resourceInfo", target)?;
        self.note_reference(index);
        let identity = self.identity(index)?;
        let mut info = Map::new();
        info.insert("id".into(), Value::String(identity.id));
        info.insert("name".into(), Value::String(identity.name));
        info.insert("type".into(), Value::String(identity.resource_type));
        if let Some(version) = identity.api_version {
            info.insert("apiVersion".into(), Value::String(version));
        }
        Ok(Value::Object(info))
    }

    /// `resourceId([subscriptionId,] [resourceGroup,] type, name1, name2...)`.
    fn fn_resource_id(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("resourceId", args, 2, usize::MAX)?;
        let texts = (0..args.len())
            .map(|i| functions::string_arg("resourceId", args, i).map(str::to_string))
            .collect::<Result<Vec<_>, _>>()?;
        let type_at = texts.iter().position(|t| t.contains('/')).ok_or_else(|| {
            ArmError::invalid_template(
                "Unable to evaluate template language function 'resourceId': no argument is a resource type like 'Namespace/type'",
            )
        })?;
        let scope = match type_at {
            0 => self.scope.clone(),
            1 | 2 => {
                let group = &texts[type_at - 1];
                let (plane, _) = ids::resource_group_of(&self.scope).ok_or_else(|| {
                    ArmError::invalid_template(format!(
                        "Unable to evaluate template language function 'resourceId': the scope '{}' has no resource group to replace with '{group}'",
                        self.scope
                    ))
                })?;
                ids::resource_group_id(&plane, group)
            }
            _ => {
                return Err(ArmError::invalid_template(
                    "Unable to evaluate template language function 'resourceId': too many arguments before the resource type",
                ));
            }
        };
        let names: Vec<String> = texts[type_at + 1..].to_vec();
        ids::resource_id(&scope, &texts[type_at], &names)
            .map(Value::String)
            .map_err(|e| {
                ArmError::invalid_template(format!(
                    "Unable to evaluate template language function 'resourceId': {e}"
                ))
            })
    }

    fn fn_copy_index(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("copyIndex", args, 0, 2)?;
        let (loop_name, offset) = match args {
            [] => (None, 0),
            [Value::String(name)] => (Some(name.as_str()), 0),
            [offset] => (None, offset.as_i64().unwrap_or(0)),
            [Value::String(name), offset] => (Some(name.as_str()), offset.as_i64().unwrap_or(0)),
            _ => {
                return Err(ArmError::invalid_template(
                    "Unable to evaluate template language function 'copyIndex': expected ([loopName], [offset])",
                ));
            }
        };
        let frame = match loop_name {
            None => self.copy_frames.last(),
            Some(wanted) => self.copy_frames.iter().rev().find(|f| {
                f.name
                    .as_deref()
                    .is_some_and(|n| n.eq_ignore_ascii_case(wanted))
            }),
        };
        let frame = frame.ok_or_else(|| {
            ArmError::invalid_template(match loop_name {
                Some(name) => format!(
                    "The template function 'copyIndex' names the loop '{name}', which is not being evaluated here"
                ),
                None => "The template function 'copyIndex' is not expected at this location (not inside a copy loop)".to_string(),
            })
        })?;
        (frame.index as i64)
            .checked_add(offset)
            .map(Value::from)
            .ok_or_else(|| {
                ArmError::invalid_template(
                    "Unable to evaluate template language function 'copyIndex': the index plus the offset overflows a 64-bit integer",
                )
            })
    }

    fn fn_resource_group(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        if !args.is_empty() {
            return Err(ArmError::invalid_template(
                "The template function 'resourceGroup' with arguments is not supported by the Radius simulator",
            ));
        }
        let (plane, name) = ids::resource_group_of(&self.scope).ok_or_else(|| {
            ArmError::invalid_template(format!(
                "The template function 'resourceGroup' is not valid: the deployment scope '{}' is not a resource group",
                self.scope
            ))
        })?;
        Ok(serde_json::json!({
            "id": ids::resource_group_id(&plane, &name),
            "name": name,
            "type": "System.Resources/resourceGroups",
            "location": "global",
            "properties": {"provisioningState": "Succeeded"},
        }))
    }

    fn fn_deployment(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("deployment", args, 0, 0)?;
        let content_version = self
            .template
            .get("contentVersion")
            .cloned()
            .unwrap_or(Value::Null);
        Ok(serde_json::json!({
            "name": self.deployment_name,
            "location": "global",
            "properties": {
                "template": {"contentVersion": content_version},
                "mode": "Incremental",
                "provisioningState": "Accepted",
            },
        }))
    }
}

/// A resource as its provider returns it (what `reference()` sees):
/// `{"id", "name", "type", "apiVersion"?, ...body, "properties": {..., "provisioningState"}}`.
fn provider_state(
    id: &str,
    name: &str,
    resource_type: &str,
    api_version: Option<&str>,
    body: Value,
) -> Value {
    let mut state = Map::new();
    state.insert("id".into(), Value::String(id.to_string()));
    state.insert("name".into(), Value::String(name.to_string()));
    state.insert("type".into(), Value::String(resource_type.to_string()));
    if let Some(version) = api_version {
        state.insert("apiVersion".into(), Value::String(version.to_string()));
    }
    if let Value::Object(body) = body {
        for (key, value) in body {
            if !state.contains_key(&key) {
                state.insert(key, value);
            }
        }
    }
    let properties = state
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(properties) = properties {
        properties
            .entry("provisioningState")
            .or_insert_with(|| Value::String("Succeeded".into()));
    }
    Value::Object(state)
}

/// A property `copy` entry: `{"name", "count", "input"}`.
fn is_copy_entry(entry: &Value) -> bool {
    entry
        .as_object()
        .is_some_and(|e| e.contains_key("name") && e.contains_key("input"))
}

/// `value.name`, case-insensitive like ARM.
fn property(value: &Value, name: &str) -> Result<Value, ArmError> {
    let Value::Object(map) = value else {
        return Err(ArmError::invalid_template(format!(
            "The language expression property '{name}' can't be evaluated: the value is {}, not an object",
            type_name(value)
        )));
    };
    if let Some(found) = map.get(name) {
        return Ok(found.clone());
    }
    if let Some((_, found)) = map.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)) {
        return Ok(found.clone());
    }
    let available: Vec<&str> = map.keys().map(String::as_str).collect();
    Err(ArmError::invalid_template(format!(
        "The language expression property '{name}' doesn't exist, available properties are '{}'",
        available.join(", ")
    )))
}

/// `value[index]`: arrays by integer, objects by (case-insensitive) key.
fn index_into(value: &Value, index: &Value) -> Result<Value, ArmError> {
    match (value, index) {
        (Value::Array(items), Value::Number(n)) => {
            let at = n.as_i64().unwrap_or(-1);
            usize::try_from(at)
                .ok()
                .and_then(|at| items.get(at))
                .cloned()
                .ok_or_else(|| {
                    ArmError::invalid_template(format!(
                        "The language expression index {at} is out of range for an array of length {}",
                        items.len()
                    ))
                })
        }
        (Value::Object(_), Value::String(key)) => property(value, key),
        (value, index) => Err(ArmError::invalid_template(format!(
            "The language expression cannot index {} with {} ('{}')",
            type_name(value),
            type_name(index),
            stringify(index)
        ))),
    }
}

/// Check a parameter value against its declaration (`type`,
/// `allowedValues`, length and value limits).
fn check_parameter(
    name: &str,
    declaration: &Map<String, Value>,
    value: &Value,
) -> Result<(), ArmError> {
    if value.is_null()
        && declaration
            .get("nullable")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    {
        return Ok(());
    }
    let declared = declaration
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    let fits = match declared.as_deref() {
        Some("string") | Some("securestring") => value.is_string(),
        Some("int") => value.is_i64() || value.is_u64(),
        Some("bool") => value.is_boolean(),
        Some("object") | Some("secureobject") => value.is_object(),
        Some("array") => value.is_array(),
        _ => true,
    };
    if !fits {
        return Err(ArmError::invalid_template(format!(
            "The template parameter '{name}' is declared as '{}' but its value is {}",
            declared.unwrap_or_default(),
            type_name(value)
        )));
    }
    if let Some(Value::Array(allowed)) = declaration.get("allowedValues") {
        let ok = match value {
            Value::Array(items) => items.iter().all(|i| allowed.contains(i)),
            other => allowed.contains(other),
        };
        if !ok {
            return Err(ArmError::invalid_template(format!(
                "The value '{}' of template parameter '{name}' is not one of the allowed values {}",
                stringify(value),
                Value::Array(allowed.clone())
            )));
        }
    }
    let length = match value {
        Value::String(s) => Some(s.chars().count() as i64),
        Value::Array(a) => Some(a.len() as i64),
        _ => None,
    };
    let limit = |key: &str| declaration.get(key).and_then(Value::as_i64);
    if let (Some(length), Some(min)) = (length, limit("minLength"))
        && length < min
    {
        return Err(ArmError::invalid_template(format!(
            "The template parameter '{name}' is shorter than its minLength {min}"
        )));
    }
    if let (Some(length), Some(max)) = (length, limit("maxLength"))
        && length > max
    {
        return Err(ArmError::invalid_template(format!(
            "The template parameter '{name}' is longer than its maxLength {max}"
        )));
    }
    if let Some(number) = value.as_i64() {
        if let Some(min) = limit("minValue")
            && number < min
        {
            return Err(ArmError::invalid_template(format!(
                "The template parameter '{name}' is {number}, less than its minValue {min}"
            )));
        }
        if let Some(max) = limit("maxValue")
            && number > max
        {
            return Err(ArmError::invalid_template(format!(
                "The template parameter '{name}' is {number}, more than its maxValue {max}"
            )));
        }
    }
    Ok(())
}
