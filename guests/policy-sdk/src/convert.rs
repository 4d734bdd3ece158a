//! The guest side of the model ⇄ WIT mapping, from the one description in
//! `radwasm_policy_model::wit_conversions!` (the host uses the same).

use crate::bindings::exports::radapp::policy::{
    metadata, resource_policy as rp, template_policy as tp,
};
use crate::bindings::radapp::policy::types as wit;

radwasm_policy_model::wit_conversions!(v0_3; types = wit, metadata = metadata, template = tp, resource = rp);
