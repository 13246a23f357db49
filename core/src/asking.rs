//! What an app may ask the MCP client of one of its calls while it runs
//! (elicitation, sampling, roots), and what that client can be asked.
//!
//! A request ([`ClientAsk`]) reaches the client only when the path its call
//! came in on can carry one back, and only when the client declared the
//! capability it needs ([`Askable`]): otherwise the app is told at once,
//! in a sentence naming what the client lacks, rather than the client
//! being sent something it cannot answer. The requests travel to the
//! caller in the call's event queue (`progress`), where they never give
//! way to newer reports.

/// A request of the app to the MCP client of one of its calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientAsk {
    /// The call's request id.
    pub request_id: String,
    /// The app's id of this request, unique among the call's outstanding
    /// ones.
    pub id: String,
    /// The MCP method ([`AskMethod`]).
    pub method: AskMethod,
    /// The params as the app wrote them: a JSON object.
    pub params_json: String,
}

/// What an app may ask the MCP client of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AskMethod {
    /// `elicitation/create`: ask the user (a form, or a URL to visit).
    Elicitation,
    /// `sampling/createMessage`: ask the client's model.
    Sampling,
    /// `roots/list`: the client's roots.
    Roots,
}

impl AskMethod {
    /// Every method, in label order.
    pub const ALL: [Self; 3] = [Self::Elicitation, Self::Sampling, Self::Roots];

    /// The method MCP names `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|method| method.as_str() == name)
    }

    /// Its MCP name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation/create",
            Self::Sampling => "sampling/createMessage",
            Self::Roots => "roots/list",
        }
    }

    /// The client capability MCP requires for it.
    pub fn capability(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation",
            Self::Sampling => "sampling",
            Self::Roots => "roots",
        }
    }
}

/// The elicitation modes a client declared. MCP 2025-11-25 has a client
/// declare `capabilities.elicitation: {}` (form mode only, as before modes
/// existed) or name each mode it supports (`{"form": {}, "url": {}}`); a
/// request in URL mode needs `url`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Elicitation {
    /// Form mode (`elicitation.form`, or an empty `elicitation`).
    pub form: bool,
    /// URL mode (`elicitation.url`).
    pub url: bool,
}

impl Elicitation {
    /// No elicitation declared.
    pub const NONE: Self = Self {
        form: false,
        url: false,
    };
    /// Form mode only: what `elicitation: {}` declares.
    pub const FORM: Self = Self {
        form: true,
        url: false,
    };
    /// Both modes.
    pub const BOTH: Self = Self {
        form: true,
        url: true,
    };

    /// What a declared `elicitation` capability with these sub-capabilities
    /// allows: neither named is form mode only.
    pub fn declared(form: bool, url: bool) -> Self {
        Self {
            form: form || !url,
            url,
        }
    }

    /// Whether any mode is declared.
    pub fn any(self) -> bool {
        self.form || self.url
    }

    /// Whether a request in `mode` may be sent.
    pub fn allows(self, mode: ElicitationMode) -> bool {
        match mode {
            ElicitationMode::Form => self.form,
            ElicitationMode::Url => self.url,
        }
    }
}

/// The mode of an `elicitation/create` request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElicitationMode {
    /// A form the user fills in (`"mode": "form"`, or no mode).
    Form,
    /// A URL the user visits (`"mode": "url"`).
    Url,
}

impl ElicitationMode {
    /// The mode `params_json` (the request's params, a JSON object) names:
    /// URL mode for `"mode": "url"`, form mode otherwise (MCP's default).
    /// Params whose `mode` cannot be read (a key given twice, say) count as
    /// URL mode, the one that needs more of the client, so that no reading
    /// of them reaches a client that declared form mode only.
    pub fn of(params_json: &str) -> Self {
        #[derive(serde::Deserialize)]
        struct Params<'a> {
            #[serde(borrow, default)]
            mode: Option<std::borrow::Cow<'a, str>>,
        }
        match serde_json::from_str::<Params<'_>>(params_json) {
            Ok(Params { mode: Some(mode) }) if mode == "url" => Self::Url,
            Ok(_) => Self::Form,
            Err(_) => Self::Url,
        }
    }

    /// The sub-capability MCP requires for it.
    pub fn capability(self) -> &'static str {
        match self {
            Self::Form => "elicitation.form",
            Self::Url => "elicitation.url",
        }
    }

    /// Its name in a request's `mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Form => "form",
            Self::Url => "url",
        }
    }
}

/// Which requests a call's caller can be sent, as far as its transport and
/// its declared capabilities tell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Askable {
    /// None: the path the call took cannot carry a request to its client.
    #[default]
    Nothing,
    /// Those its capabilities declare (known per request at 2026-07-28).
    Declared {
        /// `elicitation`, by mode.
        elicitation: Elicitation,
        /// `sampling`.
        sampling: bool,
        /// `roots`.
        roots: bool,
    },
    /// Any: the client's capabilities are not known here (declared at
    /// `initialize`, which a stateless endpoint does not keep); a client
    /// without one answers "method not found", which the app gets.
    Any,
}

impl Askable {
    /// A client that declared none of the capabilities.
    pub const NOTHING_DECLARED: Self = Self::Declared {
        elicitation: Elicitation::NONE,
        sampling: false,
        roots: false,
    };

    /// Why `method` with these params (a JSON object; for
    /// `elicitation/create` they name its mode) cannot be asked, or `None`
    /// when it can.
    pub fn refusal(self, method: AskMethod, params_json: &str) -> Option<String> {
        let declared = match (self, method) {
            (Self::Any, _) => return None,
            (Self::Nothing, _) => {
                return Some(format!(
                    "the MCP client of this call cannot be sent {}: the way its request came in carries no requests back to it",
                    method.as_str()
                ));
            }
            (Self::Declared { elicitation, .. }, AskMethod::Elicitation) => {
                if !elicitation.any() {
                    false
                } else {
                    let mode = ElicitationMode::of(params_json);
                    return (!elicitation.allows(mode)).then(|| {
                        format!(
                            "the MCP client of this call did not declare the {} capability, so it cannot be sent {} in {} mode (\"mode\": \"{}\"); ask in a mode it declared",
                            mode.capability(),
                            method.as_str(),
                            mode.as_str(),
                            mode.as_str()
                        )
                    });
                }
            }
            (Self::Declared { sampling, .. }, AskMethod::Sampling) => sampling,
            (Self::Declared { roots, .. }, AskMethod::Roots) => roots,
        };
        (!declared).then(|| {
            format!(
                "the MCP client of this call did not declare the {} capability, so it cannot be sent {}",
                method.capability(),
                method.as_str()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_refused_naming_what_the_client_lacks() {
        assert!(Askable::Any.refusal(AskMethod::Sampling, "{}").is_none());
        let declared = Askable::Declared {
            elicitation: Elicitation::FORM,
            sampling: false,
            roots: false,
        };
        assert!(declared.refusal(AskMethod::Elicitation, "{}").is_none());
        let refused = declared
            .refusal(AskMethod::Sampling, "{}")
            .expect("refused");
        assert!(refused.contains("sampling capability"), "{refused}");
        let nothing = Askable::Nothing
            .refusal(AskMethod::Roots, "{}")
            .expect("refused");
        assert!(nothing.contains("roots/list"), "{nothing}");
        assert_eq!(AskMethod::parse("roots/list"), Some(AskMethod::Roots));
        assert_eq!(AskMethod::parse("tools/call"), None);
    }

    #[test]
    fn url_mode_needs_the_url_sub_capability() {
        let url = r#"{"mode":"url","message":"Sign in","url":"https://example.com/x","elicitationId":"e1"}"#;
        let form = r#"{"mode":"form","message":"Which?","requestedSchema":{"type":"object"}}"#;
        let unnamed = r#"{"message":"Which?","requestedSchema":{"type":"object"}}"#;
        assert_eq!(ElicitationMode::of(url), ElicitationMode::Url);
        assert_eq!(ElicitationMode::of(form), ElicitationMode::Form);
        assert_eq!(ElicitationMode::of(unnamed), ElicitationMode::Form);
        // A mode that cannot be read needs what URL mode needs.
        let twice = r#"{"mode":"url","mode":"url","message":"m"}"#;
        assert_eq!(ElicitationMode::of(twice), ElicitationMode::Url);
        let with = |elicitation| Askable::Declared {
            elicitation,
            sampling: false,
            roots: false,
        };
        // `elicitation: {}`: form mode only.
        let form_only = with(Elicitation::declared(false, false));
        assert_eq!(form_only, with(Elicitation::FORM));
        assert!(form_only.refusal(AskMethod::Elicitation, unnamed).is_none());
        let refused = form_only
            .refusal(AskMethod::Elicitation, url)
            .expect("refused");
        assert!(refused.contains("elicitation.url capability"), "{refused}");
        // Both named: both allowed; URL only: a form is refused.
        let both = with(Elicitation::declared(true, true));
        assert!(both.refusal(AskMethod::Elicitation, url).is_none());
        assert!(both.refusal(AskMethod::Elicitation, form).is_none());
        let url_only = with(Elicitation::declared(false, true));
        assert!(url_only.refusal(AskMethod::Elicitation, url).is_none());
        let refused = url_only
            .refusal(AskMethod::Elicitation, form)
            .expect("refused");
        assert!(refused.contains("elicitation.form capability"), "{refused}");
        // None declared: the capability itself is named.
        let refused = with(Elicitation::NONE)
            .refusal(AskMethod::Elicitation, url)
            .expect("refused");
        assert!(
            refused.contains("did not declare the elicitation capability"),
            "{refused}"
        );
    }
}
