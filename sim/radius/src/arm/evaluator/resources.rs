//! Resources: declarations into instances (copies and conditions),
//! their identities (name, type, id) and the bodies sent to the provider.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value};

use super::{CopyFrame, Evaluator, Identity, Instance, Slot, object};
use crate::arm::functions::type_name;
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

fn template_type(declaration: &Map<String, Value>) -> Option<String> {
    declaration
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
}

impl<'a> Evaluator<'a> {
    pub(super) fn declare_resources(&mut self) -> Result<(), ArmError> {
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
        check_resource_declaration(&location, declaration, module)?;
        let extensible =
            declaration.contains_key("import") || declaration.contains_key("extension");
        let existing = declared_existing(&location, declaration)?;
        let display = if symbol.is_empty() {
            location.clone()
        } else {
            symbol.clone()
        };
        let copies = self.resource_copy_loop(&location, &display, declaration)?;
        let base = Instance {
            symbol,
            instance_name: display.clone(),
            declaration,
            location,
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
            Some((loop_name, count)) => self.declare_copies(&base, &loop_name, count),
        }
        Ok(())
    }

    /// A resource's `copy` loop: its name (the resource's `display` name if
    /// it has none) and its evaluated count; `None` without a loop.
    fn resource_copy_loop(
        &mut self,
        location: &str,
        display: &str,
        declaration: &Map<String, Value>,
    ) -> Result<Option<(String, usize)>, ArmError> {
        let copy = match declaration.get("copy") {
            None | Some(Value::Null) => return Ok(None),
            Some(copy) => object(copy, &format!("'copy' of resource '{location}'"))?,
        };
        let loop_name = copy
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(display)
            .to_string();
        let count = copy.get("count").ok_or_else(|| {
            ArmError::invalid_template(format!("'copy' of resource '{location}' has no 'count'"))
        })?;
        let count = self.eval_value(count, &format!("{location}.copy.count"))?;
        let count = count.as_u64().filter(|c| *c <= 800).ok_or_else(|| {
            ArmError::invalid_template(format!(
                "'copy.count' of resource '{location}' must be an integer from 0 to 800"
            ))
        })?;
        Ok(Some((loop_name, count as usize)))
    }

    /// One instance per element of the copy loop `loop_name` over `base`'s
    /// declaration, known by its instance name (`env[2]`), the declaration's
    /// name and the loop's name.
    fn declare_copies(&mut self, base: &Instance<'a>, loop_name: &str, count: usize) {
        let display = &base.instance_name;
        for i in 0..count {
            let index = self.instances.len();
            let instance = base.copy_element(loop_name, i);
            let instance_name = instance.instance_name.clone();
            self.instances.push(instance);
            self.add_symbol(&instance_name, index);
            self.add_symbol(display, index);
            if !loop_name.eq_ignore_ascii_case(display) {
                self.add_symbol(loop_name, index);
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

    fn add_symbol(&mut self, name: &str, index: usize) {
        self.symbols
            .entry(name.to_ascii_lowercase())
            .or_default()
            .push(index);
    }

    pub(super) fn with_copy<T>(
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
    pub(super) fn identity(&mut self, index: usize) -> Result<Identity, ArmError> {
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

    pub(super) fn check_duplicates(&mut self) -> Result<(), ArmError> {
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
    pub(super) fn body(&mut self, index: usize) -> Result<Value, ArmError> {
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

    /// What `reference()` on an instance sees: the resource as its provider
    /// returns it (`{"id", "name", "type", "properties": {...}}`).
    pub(super) fn runtime_state(&mut self, index: usize) -> Result<Value, ArmError> {
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
}

/// A resource as its provider returns it (what `reference()` sees):
/// `{"id", "name", "type", "apiVersion"?, ...body, "properties": {..., "provisioningState"}}`.
pub(super) fn provider_state(
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

impl<'a> Instance<'a> {
    /// Element `index` of the copy loop `loop_name` over this (not yet
    /// evaluated) instance's declaration: `env[2]` at `resources.env[2]`.
    fn copy_element(&self, loop_name: &str, index: usize) -> Self {
        Instance {
            symbol: self.symbol.clone(),
            instance_name: format!("{}[{index}]", self.instance_name),
            declaration: self.declaration,
            location: format!("{}[{index}]", self.location),
            copy: Some(CopyFrame {
                name: Some(loop_name.to_string()),
                index,
            }),
            extensible: self.extensible,
            existing: self.existing,
            module: self.module,
            deployed: true,
            identity: None,
            identity_busy: false,
            body: Slot::Pending,
            references: BTreeSet::new(),
            nested: None,
        }
    }
}

/// Refuse what a resource declaration may say but the simulator does not
/// support: another scope, nested child resources, a module deploying
/// elsewhere; and a declaration without a `type`.
fn check_resource_declaration(
    location: &str,
    declaration: &Map<String, Value>,
    module: bool,
) -> Result<(), ArmError> {
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
    Ok(())
}

/// The declaration's `existing` flag (absent: not existing).
fn declared_existing(location: &str, declaration: &Map<String, Value>) -> Result<bool, ArmError> {
    match declaration.get("existing") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(existing)) => Ok(*existing),
        Some(other) => Err(ArmError::invalid_template(format!(
            "'existing' of resource '{location}' must be a boolean but is {}",
            type_name(other)
        ))),
    }
}
