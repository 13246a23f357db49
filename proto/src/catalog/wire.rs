//! Declarations from and to the gRPC messages of the contract.

use std::sync::Arc;

use super::{
    CatalogError, Prompt, PromptDefinition, Resource, ResourceDefinition, ResourceTemplate,
    TemplateDefinition, validate_prompts, validate_resources, validate_templates,
};
use crate::v1;

impl From<v1::ResourceDefinition> for ResourceDefinition {
    fn from(d: v1::ResourceDefinition) -> Self {
        Self {
            uri: d.uri,
            name: d.name,
            title: d.title,
            description: d.description,
            mime_type: d.mime_type,
            size: d.size,
            annotations_json: d.annotations_json,
            icons_json: d.icons_json,
        }
    }
}

impl From<v1::ResourceTemplateDefinition> for TemplateDefinition {
    fn from(d: v1::ResourceTemplateDefinition) -> Self {
        Self {
            uri_template: d.uri_template,
            name: d.name,
            title: d.title,
            description: d.description,
            mime_type: d.mime_type,
            annotations_json: d.annotations_json,
            icons_json: d.icons_json,
        }
    }
}

impl From<v1::PromptDefinition> for PromptDefinition {
    fn from(d: v1::PromptDefinition) -> Self {
        Self {
            name: d.name,
            title: d.title,
            description: d.description,
            arguments: d
                .arguments
                .into_iter()
                .map(|a| (a.name, a.title, a.description, a.required))
                .collect(),
            icons_json: d.icons_json,
        }
    }
}

impl Resource {
    /// The wire definition.
    pub fn to_proto(&self) -> v1::ResourceDefinition {
        v1::ResourceDefinition {
            uri: self.uri.to_string(),
            name: self.name.to_string(),
            title: self.title.to_string(),
            description: self.description.to_string(),
            mime_type: self.mime_type.to_string(),
            size: self.size,
            annotations_json: self.annotations_json.to_string(),
            icons_json: self.icons_json.to_string(),
        }
    }
}

impl ResourceTemplate {
    /// The wire definition.
    pub fn to_proto(&self) -> v1::ResourceTemplateDefinition {
        v1::ResourceTemplateDefinition {
            uri_template: self.uri_template.to_string(),
            name: self.name.to_string(),
            title: self.title.to_string(),
            description: self.description.to_string(),
            mime_type: self.mime_type.to_string(),
            annotations_json: self.annotations_json.to_string(),
            icons_json: self.icons_json.to_string(),
        }
    }
}

impl Prompt {
    /// The wire definition.
    pub fn to_proto(&self) -> v1::PromptDefinition {
        v1::PromptDefinition {
            name: self.name.to_string(),
            title: self.title.to_string(),
            description: self.description.to_string(),
            arguments: self
                .arguments
                .iter()
                .map(|a| v1::PromptArgument {
                    name: a.name.to_string(),
                    title: a.title.to_string(),
                    description: a.description.to_string(),
                    required: a.required,
                })
                .collect(),
            icons_json: self.icons_json.to_string(),
        }
    }
}

/// Validates whole lists of wire definitions.
pub fn resources(list: Vec<v1::ResourceDefinition>) -> Result<Arc<[Resource]>, CatalogError> {
    validate_resources(list.into_iter().map(Into::into).collect())
}

/// Validates whole lists of wire definitions.
pub fn templates(
    list: Vec<v1::ResourceTemplateDefinition>,
) -> Result<Arc<[ResourceTemplate]>, CatalogError> {
    validate_templates(list.into_iter().map(Into::into).collect())
}

/// Validates whole lists of wire definitions.
pub fn prompts(list: Vec<v1::PromptDefinition>) -> Result<Arc<[Prompt]>, CatalogError> {
    validate_prompts(list.into_iter().map(Into::into).collect())
}
