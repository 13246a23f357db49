//! What sessions serve besides tools: the rules live in the contract crate
//! ([`openclaw_proxy_proto::catalog`]); this module adds what only the proxy
//! needs: one shared empty catalog (most sessions serve tools only, and pay
//! one pointer for it), and a declaration read whole from the wire.

use std::sync::{Arc, LazyLock};

pub use openclaw_proxy_proto::catalog::{
    Catalog, CatalogError, Prompt, PromptArgument, Resource, ResourceTemplate,
};

use crate::proto;

/// The catalog of a session that serves tools only, shared by all of them.
pub fn empty() -> Arc<Catalog> {
    static EMPTY: LazyLock<Arc<Catalog>> = LazyLock::new(Arc::default);
    EMPTY.clone()
}

/// A declaration's three lists, validated; each `None` keeps `current`'s.
/// A catalog with nothing in it is the shared [`empty`] one.
pub fn validate(
    current: &Catalog,
    resources: Option<Vec<proto::ResourceDefinition>>,
    resource_templates: Option<Vec<proto::ResourceTemplateDefinition>>,
    prompts: Option<Vec<proto::PromptDefinition>>,
) -> Result<Arc<Catalog>, CatalogError> {
    use openclaw_proxy_proto::catalog as rules;
    let catalog = Catalog {
        resources: match resources {
            Some(list) => rules::validate_wire_resources(list)?,
            None => current.resources.clone(),
        },
        resource_templates: match resource_templates {
            Some(list) => rules::validate_wire_templates(list)?,
            None => current.resource_templates.clone(),
        },
        prompts: match prompts {
            Some(list) => rules::validate_wire_prompts(list)?,
            None => current.prompts.clone(),
        },
    };
    Ok(if catalog.is_empty() {
        empty()
    } else {
        Arc::new(catalog)
    })
}
