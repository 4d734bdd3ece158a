//! The guest side of the model ⇄ WIT mapping, from the one description in
//! `radwasm_policy_model::wit_conversions!` (the host uses the same).

use crate::bindings::exports::radapp::policy::metadata;
use crate::bindings::radapp::policy::{resource_types as rp, template_types as tp, types as wit};

radwasm_policy_model::wit_conversions!(v0_6; types = wit, metadata = metadata, template = tp, resource = rp);
