//! Everything an app declares (tools, resources, resource templates,
//! prompts, the completion handler), checked as one set, indexed for the
//! requests that name them, and rendered as the contract's messages: the
//! session's creation, and updates while it runs.
//!
//! A set is immutable; an update builds a new one from the old and the
//! changes and swaps it in whole, so a request always sees one consistent
//! set, and the set a re-created session registers is the current one.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use openclaw_proxy_proto::v1::{
    CreateSessionRequest, PromptList, ResourceList, ResourceTemplateList, SessionMetadata,
    SessionOwner, UpdateTools,
};

use crate::completion::CompletionHandler;
use crate::error::AppError;
use crate::prompt::Prompt;
use crate::resource::{Resource, ResourceTemplate};
use crate::tool::Tool;

/// One consistent set of declarations.
#[derive(Clone, Default)]
pub(crate) struct Declarations {
    tools: Vec<Tool>,
    tool_index: HashMap<String, usize>,
    resources: Vec<Resource>,
    resource_index: HashMap<String, usize>,
    templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
    prompt_index: HashMap<String, usize>,
    completion: Option<Arc<CompletionHandler>>,
}

/// A change to an app's declarations while it serves: each list given
/// replaces the app's list of that kind; a list not given stays as it is.
///
/// Pass it to [`Serving::update`](crate::Serving::update).
#[derive(Debug, Default)]
#[must_use]
pub struct Update {
    tools: Option<Vec<Tool>>,
    resources: Option<Vec<Resource>>,
    resource_templates: Option<Vec<ResourceTemplate>>,
    prompts: Option<Vec<Prompt>>,
}

impl Update {
    /// No change yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The app's new tools (all of them).
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools = Some(tools.into_iter().collect());
        self
    }

    /// The app's new resources (all of them).
    pub fn resources(mut self, resources: impl IntoIterator<Item = Resource>) -> Self {
        self.resources = Some(resources.into_iter().collect());
        self
    }

    /// The app's new resource templates (all of them).
    pub fn resource_templates(
        mut self,
        templates: impl IntoIterator<Item = ResourceTemplate>,
    ) -> Self {
        self.resource_templates = Some(templates.into_iter().collect());
        self
    }

    /// The app's new prompts (all of them).
    pub fn prompts(mut self, prompts: impl IntoIterator<Item = Prompt>) -> Self {
        self.prompts = Some(prompts.into_iter().collect());
        self
    }
}

/// Which lists an update message carries besides the tools (which it
/// always carries: the contract replaces them every time).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lists {
    resources: bool,
    resource_templates: bool,
    prompts: bool,
}

impl Lists {
    /// All of them, to bring the proxy's copy in line whatever it holds.
    pub(crate) const ALL: Self = Self {
        resources: true,
        resource_templates: true,
        prompts: true,
    };
}

impl Declarations {
    /// Checks a set and indexes it; the error names the first problem.
    pub(crate) fn new(
        tools: Vec<Tool>,
        resources: Vec<Resource>,
        templates: Vec<ResourceTemplate>,
        prompts: Vec<Prompt>,
        completion: Option<Arc<CompletionHandler>>,
    ) -> Result<Self, AppError> {
        let mut tool_index = HashMap::with_capacity(tools.len());
        for (index, tool) in tools.iter().enumerate() {
            tool.check()?;
            if tool_index.insert(tool.name.clone(), index).is_some() {
                return Err(AppError::InvalidTool {
                    name: tool.name.clone(),
                    reason: "declared twice; tool names must be unique within an app".to_owned(),
                });
            }
        }
        let mut resource_index = HashMap::with_capacity(resources.len());
        for (index, resource) in resources.iter().enumerate() {
            let invalid = |reason: String| AppError::InvalidResource {
                uri: resource.uri.clone(),
                reason,
            };
            resource.check().map_err(invalid)?;
            if resource_index.insert(resource.uri.clone(), index).is_some() {
                return Err(invalid(
                    "declared twice; resource URIs must be unique within an app".to_owned(),
                ));
            }
        }
        for (index, template) in templates.iter().enumerate() {
            let invalid = |reason: String| AppError::InvalidResourceTemplate {
                uri_template: template.uri_template.clone(),
                reason,
            };
            template.check().map_err(invalid)?;
            if templates[..index]
                .iter()
                .any(|earlier| earlier.uri_template == template.uri_template)
            {
                return Err(invalid(
                    "declared twice; URI templates must be unique within an app".to_owned(),
                ));
            }
        }
        let mut prompt_index = HashMap::with_capacity(prompts.len());
        for (index, prompt) in prompts.iter().enumerate() {
            let invalid = |reason: String| AppError::InvalidPrompt {
                name: prompt.name.clone(),
                reason,
            };
            prompt.check().map_err(invalid)?;
            if prompt_index.insert(prompt.name.clone(), index).is_some() {
                return Err(invalid(
                    "declared twice; prompt names must be unique within an app".to_owned(),
                ));
            }
        }
        Ok(Self {
            tools,
            tool_index,
            resources,
            resource_index,
            templates,
            prompts,
            prompt_index,
            completion,
        })
    }

    /// This set with `update` applied, checked; and which lists changed.
    pub(crate) fn updated(&self, update: Update) -> Result<(Self, Lists), AppError> {
        let lists = Lists {
            resources: update.resources.is_some(),
            resource_templates: update.resource_templates.is_some(),
            prompts: update.prompts.is_some(),
        };
        let next = Self::new(
            update.tools.unwrap_or_else(|| self.tools.clone()),
            update.resources.unwrap_or_else(|| self.resources.clone()),
            update
                .resource_templates
                .unwrap_or_else(|| self.templates.clone()),
            update.prompts.unwrap_or_else(|| self.prompts.clone()),
            self.completion.clone(),
        )?;
        Ok((next, lists))
    }

    pub(crate) fn tool(&self, name: &str) -> Option<&Tool> {
        self.tool_index
            .get(name)
            .and_then(|&index| self.tools.get(index))
    }

    pub(crate) fn tools(&self) -> &[Tool] {
        &self.tools
    }

    pub(crate) fn resource(&self, uri: &str) -> Option<&Resource> {
        self.resource_index
            .get(uri)
            .and_then(|&index| self.resources.get(index))
    }

    /// The first template (in declaration order) that `uri` fits, with its
    /// variables.
    pub(crate) fn template_for(
        &self,
        uri: &str,
    ) -> Option<(&ResourceTemplate, BTreeMap<String, String>)> {
        self.templates
            .iter()
            .find_map(|template| Some((template, template.matches(uri)?)))
    }

    /// The template declared with exactly this URI template.
    pub(crate) fn template(&self, uri_template: &str) -> Option<&ResourceTemplate> {
        self.templates
            .iter()
            .find(|template| template.uri_template == uri_template)
    }

    pub(crate) fn prompt(&self, name: &str) -> Option<&Prompt> {
        self.prompt_index
            .get(name)
            .map(|&index| &self.prompts[index])
    }

    pub(crate) fn completion(&self) -> Option<&Arc<CompletionHandler>> {
        self.completion.as_ref()
    }

    #[cfg(test)]
    pub(crate) fn set_completion(&mut self, completion: Option<Arc<CompletionHandler>>) {
        self.completion = completion;
    }

    /// The session's creation with this set.
    pub(crate) fn create_request(
        &self,
        metadata: &SessionMetadata,
        owner: Option<SessionOwner>,
        name: &str,
    ) -> CreateSessionRequest {
        CreateSessionRequest {
            metadata: Some(metadata.clone()),
            tools: self.tools.iter().map(Tool::definition).collect(),
            resources: self.resources.iter().map(Resource::definition).collect(),
            resource_templates: self
                .templates
                .iter()
                .map(ResourceTemplate::definition)
                .collect(),
            prompts: self.prompts.iter().map(Prompt::definition).collect(),
            owner,
            name: name.to_owned(),
        }
    }

    /// The bridge's update message: the tools, and the `lists` asked for.
    pub(crate) fn update_message(&self, lists: Lists) -> UpdateTools {
        UpdateTools {
            tools: self.tools.iter().map(Tool::definition).collect(),
            resources: lists.resources.then(|| ResourceList {
                resources: self.resources.iter().map(Resource::definition).collect(),
            }),
            resource_templates: lists.resource_templates.then(|| ResourceTemplateList {
                resource_templates: self
                    .templates
                    .iter()
                    .map(ResourceTemplate::definition)
                    .collect(),
            }),
            prompts: lists.prompts.then(|| PromptList {
                prompts: self.prompts.iter().map(Prompt::definition).collect(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::call::CallContext;
    use crate::mcp_error::McpError;
    use crate::resource::ReadRequest;

    async fn empty(_: ReadRequest, _: CallContext) -> Result<Value, McpError> {
        Ok(serde_json::json!({"contents": []}))
    }

    fn prompt(name: &str) -> Prompt {
        Prompt::with_arguments(name, "", [], |_: Value, _: CallContext| async {
            Ok::<_, McpError>(Vec::<crate::PromptMessage>::new())
        })
    }

    #[test]
    fn duplicates_are_refused_naming_the_declaration() {
        let twice = Declarations::new(
            vec![],
            vec![
                Resource::new("a://x", "x", empty),
                Resource::new("a://x", "y", empty),
            ],
            vec![],
            vec![],
            None,
        );
        let message = twice.err().expect("refused").to_string();
        assert!(
            message.contains("a://x") && message.contains("twice"),
            "{message}"
        );
        let prompts =
            Declarations::new(vec![], vec![], vec![], vec![prompt("p"), prompt("p")], None);
        assert!(
            prompts
                .err()
                .expect("refused")
                .to_string()
                .contains("\"p\"")
        );
        let templates = Declarations::new(
            vec![],
            vec![],
            vec![
                ResourceTemplate::new("a://{id}", "a", empty),
                ResourceTemplate::new("a://{id}", "b", empty),
            ],
            vec![],
            None,
        );
        assert!(
            templates
                .err()
                .expect("refused")
                .to_string()
                .contains("a://{id}")
        );
    }

    #[test]
    fn an_exact_uri_wins_and_templates_match_in_order() {
        let set = Declarations::new(
            vec![],
            vec![Resource::new("notes:///index", "index", empty)],
            vec![
                ResourceTemplate::new("notes:///{id}", "note", empty),
                ResourceTemplate::new("notes:///{+path}", "anything", empty),
            ],
            vec![],
            None,
        )
        .expect("valid");
        assert!(set.resource("notes:///index").is_some());
        let (first, _) = set.template_for("notes:///7").expect("fits");
        assert_eq!(first.uri_template, "notes:///{id}");
        let (second, variables) = set.template_for("notes:///a/b").expect("fits");
        assert_eq!(second.uri_template, "notes:///{+path}");
        assert_eq!(variables.get("path").map(String::as_str), Some("a/b"));
        assert!(set.template_for("other:///7").is_none());
    }

    #[test]
    fn an_update_replaces_the_lists_it_names_and_its_message_carries_only_those() {
        let set = Declarations::new(
            vec![],
            vec![Resource::new("a://one", "one", empty)],
            vec![],
            vec![prompt("p")],
            None,
        )
        .expect("valid");
        let (next, lists) = set
            .updated(Update::new().resources([Resource::new("a://two", "two", empty)]))
            .expect("valid update");
        assert!(next.resource("a://one").is_none() && next.resource("a://two").is_some());
        assert!(next.prompt("p").is_some(), "prompts unchanged");
        let message = next.update_message(lists);
        assert_eq!(message.resources.map(|list| list.resources.len()), Some(1));
        assert!(message.prompts.is_none() && message.resource_templates.is_none());
        let everything = next.update_message(Lists::ALL);
        assert_eq!(everything.prompts.map(|list| list.prompts.len()), Some(1));
        let request = next.create_request(&SessionMetadata::default(), None, "");
        assert_eq!(request.resources[0].uri, "a://two");
        assert_eq!(request.prompts[0].name, "p");
    }
}
