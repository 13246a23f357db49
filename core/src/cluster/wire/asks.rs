//! What nodes say to each other about the app's requests to the MCP client
//! of a call (elicitation, sampling, roots) and the confirmation gate's:
//!
//! - the calling node declares which requests its caller can be sent
//!   ([`ASKABLE`]), so that the holding node refuses the others at once, as
//!   on one node;
//! - the holding node relays each request on the call's reply subject
//!   ([`KIND_ASK`], body [`Ask`]), for the calling node to ask its client in
//!   the client's revision;
//! - a client's answer that reaches a node without the app's bridge goes to
//!   the node that holds it (`{prefix}.answer.{session_id}`, body
//!   [`Answer`], reply [`Answered`]);
//! - a 2026-07-28 retry that reaches a node other than the one its call is
//!   parked on goes to that node (`{prefix}.resume.{node}`), which answers
//!   with the HTTP answer it made ([`KIND_RESUMED`], [`STATUS`],
//!   [`EVENT_STREAM`], the body as is).
//!
//! The confirmation gate runs on the holding node ([`GATE`]); a call of a
//! gated tool is sent in [`GATED_CALL_VERSION`](super::GATED_CALL_VERSION),
//! which a node of the release before (whose calling node asked, and whose
//! holding node would run the call unasked) refuses. All the rest are new
//! messages and headers a node of the version before ignores (or never
//! receives, for lack of a subscription), so other messages keep their
//! version.

use async_nats::HeaderMap;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::asking::{AskMethod, Askable, ClientAsk, Elicitation, ElicitationMode};
use crate::bridge::{ClientAnswer, Unanswerable};

/// Header carrying which of the app's requests the caller can be sent:
/// `any`, or the capabilities it declared, comma-separated (`none` for
/// none); absent when its path carries no requests back (and from nodes of
/// versions before requests crossed nodes). Nodes of versions that answered
/// some 2026-07-28 requests in one piece wrote `one-piece;` before the
/// capabilities of such a call: read as nothing can be asked, which refuses
/// the same requests.
pub const ASKABLE: &str = "Ocp-Askable";

/// Header carrying the elicitation modes the caller declared (`form`,
/// `url`, comma-separated), beside an [`ASKABLE`] that names
/// `elicitation`. Absent from nodes of versions that did not tell modes
/// apart: both modes are allowed then, as those versions allowed them (the
/// client answers a mode it lacks with an error, which the app gets). A
/// header of its own, so that nodes of those versions, which read an
/// [`ASKABLE`] value they do not know as "nothing can be asked", ignore it.
pub const ELICITATION_MODES: &str = "Ocp-Elicitation-Modes";

/// Header on every tool call from a node whose holding node runs the
/// confirmation gate (`holder`): the holding node asks for confirmation
/// whenever its copy of the tool says so, even of a call its caller saw as
/// ungated (a definition changed meanwhile). Without it (a node of a
/// release before, which asked itself) the holding node asks only for a
/// call in [`GATED_CALL_VERSION`](super::GATED_CALL_VERSION).
pub const GATE: &str = "Ocp-Gate";
/// The [`GATE`] header's value.
pub const GATE_HOLDER: &str = "holder";

/// Whether the calling node saw the call as one to confirm (it sent it in
/// [`GATED_CALL_VERSION`](super::GATED_CALL_VERSION)): its tool asks, or
/// the calling node's policy does.
pub fn caller_gated(headers: Option<&HeaderMap>) -> bool {
    super::version(headers) >= super::GATED_CALL_VERSION
}

/// Whether the holding node runs the confirmation gate for a call with
/// these headers.
pub fn holder_gates(headers: Option<&HeaderMap>) -> bool {
    super::version(headers) >= super::GATED_CALL_VERSION
        || headers
            .and_then(|headers| headers.get(GATE))
            .is_some_and(|value| value.as_str() == GATE_HOLDER)
}

/// Reply kind: a request of the app (or of the gate) for the caller's
/// client (body [`Ask`]).
pub const KIND_ASK: &str = "ask";

/// Reply kind: the answer to a retry resumed on its call's node (the
/// body is the HTTP answer's, as is).
pub const KIND_RESUMED: &str = "resumed";
/// Header of a resumed retry's answer: its HTTP status.
pub const STATUS: &str = "Ocp-Status";
/// Header of a resumed retry's answer: present when its body is an event
/// stream rather than one JSON message.
pub const EVENT_STREAM: &str = "Ocp-Event-Stream";

/// The [`ASKABLE`] header's value for `askable`; `None` for
/// [`Askable::Nothing`] (no header).
pub fn askable_header(askable: Askable) -> Option<String> {
    let declared = |elicitation: Elicitation, sampling: bool, roots: bool| {
        let declared: Vec<&str> = [
            (elicitation.any(), AskMethod::Elicitation),
            (sampling, AskMethod::Sampling),
            (roots, AskMethod::Roots),
        ]
        .into_iter()
        .filter(|(declared, _)| *declared)
        .map(|(_, method)| method.capability())
        .collect();
        if declared.is_empty() {
            "none".to_owned()
        } else {
            declared.join(",")
        }
    };
    match askable {
        Askable::Nothing => None,
        Askable::Any => Some("any".to_owned()),
        Askable::Declared {
            elicitation,
            sampling,
            roots,
        } => Some(declared(elicitation, sampling, roots)),
    }
}

/// The [`ELICITATION_MODES`] header's value for `askable`: `None` unless it
/// declares elicitation.
pub fn elicitation_modes_header(askable: Askable) -> Option<String> {
    let Askable::Declared { elicitation, .. } = askable else {
        return None;
    };
    let modes: Vec<&str> = [
        (elicitation.form, ElicitationMode::Form),
        (elicitation.url, ElicitationMode::Url),
    ]
    .into_iter()
    .filter(|(declared, _)| *declared)
    .map(|(_, mode)| mode.as_str())
    .collect();
    (!modes.is_empty()).then(|| modes.join(","))
}

/// What the [`ASKABLE`] and [`ELICITATION_MODES`] headers say; the absence
/// of the first (or a value this version cannot read) is
/// [`Askable::Nothing`], so nothing is asked of a client that may not be
/// able to answer.
pub fn read_askable(headers: Option<&HeaderMap>) -> Askable {
    let Some(value) = headers.and_then(|headers| headers.get(ASKABLE)) else {
        return Askable::Nothing;
    };
    let value = value.as_str().trim();
    if value == "any" {
        return Askable::Any;
    }
    let modes = headers
        .and_then(|headers| headers.get(ELICITATION_MODES))
        .and_then(|modes| read_modes(modes.as_str()));
    read_declared(value, modes)
}

/// The capabilities an [`ASKABLE`] header lists (`none`, or names joined by
/// commas), with the elicitation modes its [`ELICITATION_MODES`] header
/// named (both when it named none: nodes that did not tell modes apart
/// allowed both); [`Askable::Nothing`] for a list this version cannot read.
fn read_declared(value: &str, modes: Option<Elicitation>) -> Askable {
    let (mut elicitation, mut sampling, mut roots) = (false, false, false);
    if value != "none" {
        for capability in value.split(',').map(str::trim) {
            match capability {
                "elicitation" => elicitation = true,
                "sampling" => sampling = true,
                "roots" => roots = true,
                _ => return Askable::Nothing,
            }
        }
    }
    let elicitation = if elicitation {
        modes.unwrap_or(Elicitation::BOTH)
    } else {
        Elicitation::NONE
    };
    Askable::Declared {
        elicitation,
        sampling,
        roots,
    }
}

/// The modes an [`ELICITATION_MODES`] value names; `None` when it names
/// none, or one this version does not know.
fn read_modes(value: &str) -> Option<Elicitation> {
    let mut modes = Elicitation::NONE;
    for mode in value.split(',').map(str::trim) {
        match mode {
            "form" => modes.form = true,
            "url" => modes.url = true,
            _ => return None,
        }
    }
    modes.any().then_some(modes)
}

/// A request for the caller's client, relayed to the calling node.
#[derive(Debug, Serialize, Deserialize)]
pub struct Ask<'a> {
    /// The call's request id on the holding node.
    #[serde(borrow)]
    pub request_id: std::borrow::Cow<'a, str>,
    /// The app's id of the request (or the gate's).
    #[serde(borrow)]
    pub id: std::borrow::Cow<'a, str>,
    /// The MCP method.
    #[serde(borrow)]
    pub method: std::borrow::Cow<'a, str>,
    /// The params, exactly as the app wrote them (a JSON object).
    #[serde(borrow)]
    pub params: &'a RawValue,
}

/// The message relaying `ask`.
pub fn ask_message(ask: &ClientAsk) -> Bytes {
    let params: &RawValue = serde_json::from_str(&ask.params_json).unwrap_or(RawValue::NULL);
    let body = serde_json::to_vec(&Ask {
        request_id: ask.request_id.as_str().into(),
        id: ask.id.as_str().into(),
        method: ask.method.as_str().into(),
        params,
    })
    .unwrap_or_default();
    Bytes::from(body)
}

/// The request a [`KIND_ASK`] message relays; the error says what is wrong
/// with it.
pub fn read_ask(payload: &[u8]) -> Result<ClientAsk, String> {
    let ask: Ask<'_> = serde_json::from_slice(payload).map_err(|error| error.to_string())?;
    let method = AskMethod::parse(&ask.method)
        .ok_or_else(|| format!("{:?} is not a request a client can be sent", ask.method))?;
    if !ask.params.get().starts_with('{') {
        return Err("the params of a request to a client must be a JSON object".into());
    }
    Ok(ClientAsk {
        request_id: ask.request_id.into_owned(),
        id: ask.id.into_owned(),
        method,
        params_json: ask.params.get().to_owned(),
    })
}

/// A client's answer, on its way to the node holding the app's bridge.
#[derive(Debug, Serialize, Deserialize)]
pub struct Answer<'a> {
    /// The call's request id.
    #[serde(borrow)]
    pub request_id: std::borrow::Cow<'a, str>,
    /// The request's id within the call.
    #[serde(borrow)]
    pub id: std::borrow::Cow<'a, str>,
    /// The client's result, exactly as it sent it.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub result: Option<&'a RawValue>,
    /// The client's JSON-RPC error.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub error: Option<AnswerError<'a>>,
}

/// A client's JSON-RPC error in an [`Answer`].
#[derive(Debug, Serialize, Deserialize)]
pub struct AnswerError<'a> {
    pub code: i32,
    #[serde(borrow)]
    pub message: std::borrow::Cow<'a, str>,
    /// Exactly as the client sent it; left out for none.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub data: Option<&'a RawValue>,
}

/// The message carrying a client's answer to request `id` of the call
/// `request_id`.
pub fn answer_message(request_id: &str, id: &str, answer: &ClientAnswer) -> Bytes {
    let (result, error) = match answer {
        ClientAnswer::Result(json) => (serde_json::from_str::<&RawValue>(json).ok(), None),
        ClientAnswer::Error {
            code,
            message,
            data_json,
        } => (
            None,
            Some(AnswerError {
                code: *code,
                message: message.as_str().into(),
                data: serde_json::from_str::<&RawValue>(data_json).ok(),
            }),
        ),
    };
    let body = serde_json::to_vec(&Answer {
        request_id: request_id.into(),
        id: id.into(),
        result,
        error,
    })
    .unwrap_or_default();
    Bytes::from(body)
}

/// The call, the request and the answer an [`Answer`] message carries.
pub fn read_answer(payload: &[u8]) -> Result<(String, String, ClientAnswer), String> {
    let answer: Answer<'_> = serde_json::from_slice(payload).map_err(|error| error.to_string())?;
    let client_answer = match (answer.result, answer.error) {
        (Some(result), None) => ClientAnswer::Result(result.get().to_owned()),
        (None, Some(error)) => ClientAnswer::Error {
            code: error.code,
            message: error.message.into_owned(),
            data_json: error
                .data
                .map(|data| data.get().to_owned())
                .unwrap_or_default(),
        },
        _ => return Err("an answer carries a result or an error".into()),
    };
    Ok((
        answer.request_id.into_owned(),
        answer.id.into_owned(),
        client_answer,
    ))
}

/// What became of an answer on the node holding the bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answered {
    /// Passed on to the app (or to the gate).
    Passed,
    /// [`Unanswerable::NoCall`].
    NoCall,
    /// [`Unanswerable::NotOutstanding`].
    NotOutstanding,
    /// [`Unanswerable::BridgeEnded`].
    BridgeEnded,
}

impl Answered {
    /// The reply for what became of an answer.
    pub fn of(passed: Result<(), Unanswerable>) -> Self {
        match passed {
            Ok(()) => Self::Passed,
            Err(Unanswerable::NoCall) => Self::NoCall,
            Err(Unanswerable::NotOutstanding) => Self::NotOutstanding,
            Err(Unanswerable::BridgeEnded) => Self::BridgeEnded,
        }
    }

    /// What the answering node said became of the answer.
    pub fn into_result(self) -> Result<(), Unanswerable> {
        match self {
            Self::Passed => Ok(()),
            Self::NoCall => Err(Unanswerable::NoCall),
            Self::NotOutstanding => Err(Unanswerable::NotOutstanding),
            Self::BridgeEnded => Err(Unanswerable::BridgeEnded),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_caller_can_be_asked_crosses_in_headers() {
        let cases = [
            Askable::Any,
            Askable::NOTHING_DECLARED,
            Askable::Declared {
                elicitation: Elicitation::FORM,
                sampling: false,
                roots: true,
            },
            Askable::Declared {
                elicitation: Elicitation::BOTH,
                sampling: true,
                roots: false,
            },
            Askable::Declared {
                elicitation: Elicitation::declared(false, true),
                sampling: false,
                roots: false,
            },
            Askable::Declared {
                elicitation: Elicitation::NONE,
                sampling: true,
                roots: false,
            },
        ];
        for askable in cases {
            let mut headers = HeaderMap::new();
            headers.insert(ASKABLE, askable_header(askable).expect("a header").as_str());
            if let Some(modes) = elicitation_modes_header(askable) {
                headers.insert(ELICITATION_MODES, modes.as_str());
            }
            assert_eq!(read_askable(Some(&headers)), askable);
        }
        assert_eq!(askable_header(Askable::Nothing), None);
        assert_eq!(read_askable(None), Askable::Nothing);
        let mut strange = HeaderMap::new();
        strange.insert(ASKABLE, "elicitation,telepathy");
        assert_eq!(read_askable(Some(&strange)), Askable::Nothing);
        // What a node of a version that answered some calls in one piece
        // wrote for one: nothing can be asked, the same refusals.
        strange.insert(ASKABLE, "one-piece;elicitation");
        assert_eq!(read_askable(Some(&strange)), Askable::Nothing);
    }

    #[test]
    fn a_form_only_caller_is_still_told_to_older_nodes_as_eliciting() {
        let form_only = Askable::Declared {
            elicitation: Elicitation::FORM,
            sampling: false,
            roots: false,
        };
        // What a node of the version before reads: the old header, as it
        // was, and no value it does not know.
        assert_eq!(askable_header(form_only).as_deref(), Some("elicitation"));
        assert_eq!(elicitation_modes_header(form_only).as_deref(), Some("form"));
        // From a node of the version before (no modes): both allowed, as
        // that version allowed them.
        let mut older = HeaderMap::new();
        older.insert(ASKABLE, "elicitation");
        assert_eq!(
            read_askable(Some(&older)),
            Askable::Declared {
                elicitation: Elicitation::BOTH,
                sampling: false,
                roots: false,
            }
        );
        // Modes this version does not know: as if untold.
        older.insert(ELICITATION_MODES, "form,hologram");
        assert_eq!(
            read_askable(Some(&older)),
            Askable::Declared {
                elicitation: Elicitation::BOTH,
                sampling: false,
                roots: false,
            }
        );
    }

    #[test]
    fn the_holding_node_gates_unless_an_older_caller_asked_already() {
        let with = |pairs: &[(&str, &str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.insert(*name, *value);
            }
            headers
        };
        // A node of the release before: version 2 (or none), no header.
        assert!(!holder_gates(None));
        assert!(!holder_gates(Some(&with(&[("Ocp-Wire", "2")]))));
        // This release: every tool call says so; a gated one is version 3.
        assert!(holder_gates(Some(&with(&[
            ("Ocp-Wire", "2"),
            (GATE, GATE_HOLDER)
        ]))));
        assert!(holder_gates(Some(&with(&[("Ocp-Wire", "3")]))));
    }

    #[test]
    fn a_request_and_an_answer_cross_with_their_json_exactly() {
        let ask = ClientAsk {
            request_id: "s:4294967297".into(),
            id: "q/1 \"ü\"".into(),
            method: AskMethod::Sampling,
            params_json: r#"{"n":1e400,"big":12345678901234567890}"#.into(),
        };
        assert_eq!(read_ask(&ask_message(&ask)), Ok(ask));
        assert!(
            read_ask(br#"{"request_id":"s:1","id":"a","method":"tools/call","params":{}}"#)
                .is_err()
        );
        assert!(
            read_ask(br#"{"request_id":"s:1","id":"a","method":"roots/list","params":[]}"#)
                .is_err()
        );

        let result = ClientAnswer::Result(r#"{"action":"accept","n":1e400}"#.into());
        let (request_id, id, back) =
            read_answer(&answer_message("s:1", "a", &result)).expect("read");
        assert_eq!((request_id.as_str(), id.as_str()), ("s:1", "a"));
        assert!(
            matches!(back, ClientAnswer::Result(json) if json == r#"{"action":"accept","n":1e400}"#)
        );
        let error = ClientAnswer::Error {
            code: -32601,
            message: "no".into(),
            data_json: r#"{"x":0.10000000000000000555}"#.into(),
        };
        let (_, _, back) = read_answer(&answer_message("s:1", "a", &error)).expect("read");
        assert!(matches!(
            back,
            ClientAnswer::Error { code: -32601, ref data_json, .. } if data_json == r#"{"x":0.10000000000000000555}"#
        ));
        assert!(read_answer(br#"{"request_id":"s:1","id":"a"}"#).is_err());
        for outcome in [
            Ok(()),
            Err(Unanswerable::NoCall),
            Err(Unanswerable::NotOutstanding),
            Err(Unanswerable::BridgeEnded),
        ] {
            let wire = serde_json::to_string(&Answered::of(outcome)).expect("encode");
            let back: Answered = serde_json::from_str(&wire).expect("decode");
            assert_eq!(back.into_result(), outcome);
        }
    }
}
