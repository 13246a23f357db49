use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::caller::{Caller, CallerKind, OAuthIdentity};

fn owner(session: &str, subject: &str) -> TaskOwner {
    let identity = OAuthIdentity {
        issuer: "https://issuer.example".into(),
        subject: subject.into(),
        client_id: String::new(),
        scopes: Vec::new(),
    };
    TaskOwner::new(session, &Caller::oauth(Arc::new(identity)))
}

fn result(text: &str) -> TaskOutcome {
    TaskOutcome::Result(RawValue::from_string(text.to_owned()).expect("json"))
}

#[test]
fn a_task_opens_only_to_the_session_and_credential_that_created_it() {
    let tasks = Tasks::new(TaskSettings::default());
    let alice = owner("s1", "alice");
    let created = tasks.create(alice.clone(), None).expect("created");
    let id = &created.state.id;
    assert_eq!(
        tasks.get(&alice, id).expect("own").status,
        TaskStatus::Working
    );
    let others = [
        owner("s1", "bob"),
        owner("s2", "alice"),
        TaskOwner::new("s1", &Caller::of_kind(CallerKind::GlobalToken)),
    ];
    for other in &others {
        assert_eq!(tasks.get(other, id), Err(TaskError::NotFound));
        assert_eq!(tasks.cancel(other, id), Err(TaskError::NotFound));
        assert!(tasks.list(other, None).expect("list").0.is_empty());
    }
    assert_eq!(tasks.get(&alice, "no-such-task"), Err(TaskError::NotFound));
}

#[test]
fn ids_are_unguessable_and_distinct() {
    let tasks = Tasks::new(TaskSettings::default());
    let a = tasks.create(owner("s", "a"), None).expect("a").state.id;
    let b = tasks.create(owner("s", "a"), None).expect("b").state.id;
    assert_ne!(a, b);
    // 128 bits in unpadded base64url.
    assert_eq!(a.len(), 22, "{a}");
}

#[test]
fn the_ttl_is_the_clients_capped_by_the_setting() {
    let settings = TaskSettings {
        max_ttl: Duration::from_secs(60),
        ..TaskSettings::default()
    };
    let tasks = Tasks::new(settings);
    let asked = |ttl| {
        tasks
            .create(owner("s", "a"), ttl)
            .expect("created")
            .state
            .ttl_ms
    };
    assert_eq!(asked(Some(5_000)), 5_000);
    assert_eq!(asked(Some(3_600_000)), 60_000);
    assert_eq!(asked(None), 60_000);
}

#[tokio::test]
async fn a_result_waits_for_its_fetcher_and_ends_the_task() {
    let tasks = Arc::new(Tasks::new(TaskSettings::default()));
    let alice = owner("s", "alice");
    let id = tasks.create(alice.clone(), None).expect("created").state.id;
    let waiting = {
        let (tasks, alice, id) = (tasks.clone(), alice.clone(), id.clone());
        tokio::spawn(async move { tasks.outcome(&alice, &id).await })
    };
    tasks.set_status(&id, TaskStatus::InputRequired, "");
    assert_eq!(
        tasks.get(&alice, &id).expect("get").status,
        TaskStatus::InputRequired
    );
    tasks.set_status(&id, TaskStatus::Working, "");
    let exact = r#"{"content":[],"structuredContent":{"n":9007199254740993}}"#;
    let state = tasks.finish(&id, result(exact), false).expect("finished");
    assert_eq!(state.status, TaskStatus::Completed);
    let (state, outcome) = waiting.await.expect("join").expect("outcome");
    assert_eq!(state.status, TaskStatus::Completed);
    let TaskOutcome::Result(raw) = outcome else {
        panic!("a result, not {outcome:?}");
    };
    assert_eq!(raw.get(), exact, "kept as written");
    assert_eq!(tasks.result_bytes("s"), (exact.len(), exact.len()));
}

#[test]
fn terminal_states_are_sticky_and_cancelling_one_is_refused() {
    let tasks = Tasks::new(TaskSettings::default());
    let alice = owner("s", "alice");
    let created = tasks.create(alice.clone(), None).expect("created");
    let id = &created.state.id;
    let cancelled = tasks.cancel(&alice, id).expect("cancelled");
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    assert!(created.cancel.is_cancelled(), "the call is told to stop");
    // The call answers after all: the task stays cancelled.
    let after = tasks.finish(id, result("{}"), false).expect("state");
    assert_eq!(after.status, TaskStatus::Cancelled);
    tasks.set_status(id, TaskStatus::Working, "");
    assert_eq!(
        tasks.get(&alice, id).expect("get").status,
        TaskStatus::Cancelled
    );
    assert_eq!(
        tasks.cancel(&alice, id),
        Err(TaskError::Terminal(TaskStatus::Cancelled))
    );
    let done = tasks.create(alice.clone(), None).expect("created").state.id;
    tasks.finish(&done, result("{}"), true);
    assert_eq!(
        tasks.cancel(&alice, &done),
        Err(TaskError::Terminal(TaskStatus::Failed))
    );
    assert_eq!(
        tasks.result_bytes("s").0,
        2,
        "a cancelled task's late result is not kept"
    );
}

#[test]
fn results_over_a_bound_fail_their_task_naming_the_setting() {
    let settings = TaskSettings {
        max_result_bytes_per_session: 10,
        max_result_bytes_total: 15,
        ..TaskSettings::default()
    };
    let tasks = Tasks::new(settings);
    let (a, b) = (owner("s1", "a"), owner("s2", "b"));
    let first = tasks.create(a.clone(), None).expect("first").state.id;
    assert_eq!(
        tasks
            .finish(&first, result("[1,2,3,4]"), false)
            .expect("kept")
            .status,
        TaskStatus::Completed
    );
    let second = tasks.create(a.clone(), None).expect("second").state.id;
    let refused = tasks
        .finish(&second, result("[1,2]"), false)
        .expect("state");
    assert_eq!(refused.status, TaskStatus::Failed);
    assert!(
        refused
            .status_message
            .contains("OPENCLAW_PROXY_TASK_RESULT_BYTES_PER_SESSION"),
        "{}",
        refused.status_message
    );
    let third = tasks.create(b.clone(), None).expect("third").state.id;
    let refused = tasks
        .finish(&third, result("[1,2,3,4]"), false)
        .expect("state");
    assert!(
        refused
            .status_message
            .contains("OPENCLAW_PROXY_TASK_RESULT_BYTES_TOTAL"),
        "{}",
        refused.status_message
    );
}

#[test]
fn lists_are_the_owners_own_in_pages_and_refuse_forged_cursors() {
    let tasks = Tasks::new(TaskSettings::default());
    let (alice, bob) = (owner("s", "alice"), owner("s", "bob"));
    let mut made = Vec::new();
    for n in 0..(PAGE_SIZE + 3) {
        made.push(tasks.create(alice.clone(), None).expect("alice's").state.id);
        if n % 10 == 0 {
            tasks.create(bob.clone(), None).expect("bob's");
        }
    }
    let (first, next) = tasks.list(&alice, None).expect("first page");
    assert_eq!(first.len(), PAGE_SIZE);
    let (second, last) = tasks.list(&alice, next.as_deref()).expect("second page");
    assert_eq!(last, None);
    let listed: Vec<String> = first
        .into_iter()
        .chain(second)
        .map(|task| task.id)
        .collect();
    assert_eq!(
        listed, made,
        "all of alice's, in creation order, none of bob's"
    );
    assert_eq!(tasks.list(&alice, Some("x")), Err(TaskError::BadCursor));
}

#[test]
fn expired_tasks_are_gone_with_their_results() {
    let tasks = Tasks::new(TaskSettings::default());
    let alice = owner("s", "alice");
    let created = tasks.create(alice.clone(), Some(1)).expect("created");
    tasks.finish(&created.state.id, result("[1]"), false);
    // A millisecond-long ttl: expired at the next look, however soon.
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(
        tasks.get(&alice, &created.state.id),
        Err(TaskError::NotFound)
    );
    assert_eq!(tasks.result_bytes("s"), (0, 0));
}
