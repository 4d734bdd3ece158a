//! Dependencies between instances (`dependsOn` and references) and the
//! deployment order they give.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Evaluator;
use crate::arm::functions::type_name;
use crate::error::ArmError;
use crate::ids;

impl<'a> Evaluator<'a> {
    /// The deployed instances that are done before `index` starts: its
    /// dependencies and theirs. Evaluates their bodies (which is where
    /// implicit dependencies are found).
    pub(super) fn deployed_before(&mut self, index: usize) -> Result<BTreeSet<usize>, ArmError> {
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

    pub(super) fn resolve_one(&mut self, function: &str, target: &str) -> Result<usize, ArmError> {
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

    pub(super) fn note_reference(&mut self, index: usize) {
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
    pub(super) fn order(&mut self) -> Result<Vec<usize>, ArmError> {
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
}
