//! `Conversation` against a naive model, over random sequences of what the
//! agent does to a conversation (instructions begun, rounds finished,
//! instructions completed or abandoned, tool results trimmed, spans
//! summarized, the system message replaced) and of saving it to a real
//! store and resuming it in a "new process".
//!
//! The model keeps plain messages with two flags each: whether it belongs
//! to the completed part of the instruction in progress, and whether it is
//! that instruction's user message. After every step the conversation must
//! hold the model's messages; after every save, the checkpoint must load
//! back as exactly those messages (every message is unique, so a leaf
//! naming the wrong stored message cannot go unnoticed).

use hel_agent::Conversation;
use hel_store::{CommitInput, SessionLease, SessionState, Store};
use proptest::prelude::*;
use serde_json::{json, Value};

#[derive(Debug, Clone)]
enum Op {
    Begin,
    Push,
    RoundFinished,
    Finish,
    Abandon,
    /// Edit message `i % len`.
    Edit(usize),
    /// Summarize `a..b` (both `% (len + 1)`, ordered; from 1 at least).
    Summarize(usize, usize),
    SetSystem,
    /// Set the system message to what it is (no change).
    SameSystem,
    Save,
    Resume,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Begin),
        6 => Just(Op::Push),
        3 => Just(Op::RoundFinished),
        2 => Just(Op::Finish),
        2 => Just(Op::Abandon),
        2 => any::<usize>().prop_map(Op::Edit),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Op::Summarize(a, b)),
        1 => Just(Op::SetSystem),
        1 => Just(Op::SameSystem),
        3 => Just(Op::Save),
        1 => Just(Op::Resume),
    ]
}

#[derive(Debug, Clone)]
struct Msg {
    value: Value,
    /// In the completed part of the instruction in progress.
    complete: bool,
    /// The user message of the instruction in progress.
    user: bool,
}

/// The naive model.
#[derive(Default)]
struct Model {
    msgs: Vec<Msg>,
    open: bool,
}

impl Model {
    fn values(&self) -> Vec<Value> {
        self.msgs.iter().map(|m| m.value.clone()).collect()
    }

    fn close(&mut self) {
        self.open = false;
        for m in &mut self.msgs {
            m.complete = true;
            m.user = false;
        }
    }

    fn push(&mut self, value: Value, user: bool) {
        self.msgs.push(Msg {
            value,
            complete: !self.open || user,
            user,
        });
    }

    fn abandon(&mut self) {
        if !self.open {
            return;
        }
        self.msgs.retain(|m| m.complete);
        // No round finished after the user message: it goes too.
        if self.msgs.last().is_some_and(|m| m.user) {
            self.msgs.pop();
        }
        self.close();
    }
}

/// A conversation, its model, and the store it is saved to.
struct World {
    conv: Conversation,
    model: Model,
    store: Store,
    lease: Option<SessionLease>,
    state: SessionState,
    saved: bool,
    counter: u64,
}

impl World {
    fn unique(&mut self, what: &str) -> String {
        self.counter += 1;
        format!("{what} {}", self.counter)
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Begin => {
                let text = self.unique("instruction");
                self.model.close();
                self.model.open = true;
                self.model
                    .push(json!({"role": "user", "content": text}), true);
                self.conv.begin_instruction(&text);
            }
            Op::Push => {
                let m = json!({"role": "assistant", "content": self.unique("answer")});
                self.model.push(m.clone(), false);
                self.conv.push(m);
            }
            Op::RoundFinished => {
                if self.model.open {
                    for m in &mut self.model.msgs {
                        m.complete = true;
                    }
                }
                self.conv.round_finished();
            }
            Op::Finish => {
                self.model.close();
                self.conv.finish_instruction();
            }
            Op::Abandon => {
                self.model.abandon();
                self.conv.abandon_instruction();
            }
            Op::Edit(i) => {
                if self.model.msgs.is_empty() {
                    return;
                }
                let i = i % self.model.msgs.len();
                let text = self.unique("edited");
                self.model.msgs[i].value["content"] = json!(text);
                self.conv.edit(i, |m| m["content"] = json!(text));
            }
            Op::Summarize(a, b) => self.summarize(*a, *b),
            Op::SetSystem => {
                let system = json!({"role": "system", "content": self.unique("system")});
                self.set_system(system);
            }
            Op::SameSystem => {
                if let Some(first) = self.model.msgs.first() {
                    if first.value["role"] == "system" {
                        let same = first.value.clone();
                        assert!(!self.conv.set_system(same));
                    }
                }
            }
            Op::Save => self.save(),
            Op::Resume => self.resume(),
        }
    }

    fn summarize(&mut self, a: usize, b: usize) {
        let n = self.model.msgs.len() + 1;
        let (start, end) = ((a % n).min(b % n).max(1), (a % n).max(b % n));
        if start >= end {
            return;
        }
        let summary = json!({"role": "user", "content": self.unique("summary")});
        let span: Vec<Msg> = self.model.msgs.drain(start..end).collect();
        let complete = !self.model.open || span.iter().any(|m| m.complete);
        self.model.msgs.insert(
            start,
            Msg {
                value: summary.clone(),
                complete,
                user: false,
            },
        );
        self.conv.summarize(start, end, summary);
    }

    fn set_system(&mut self, system: Value) {
        match self.model.msgs.first_mut() {
            Some(m) if m.value["role"] == "system" => m.value = system.clone(),
            _ => self.model.msgs.insert(
                0,
                Msg {
                    value: system.clone(),
                    complete: true,
                    user: false,
                },
            ),
        }
        assert!(self.conv.set_system(system));
    }

    fn save(&mut self) {
        let Some(lease) = &self.lease else {
            return;
        };
        let committed = self
            .store
            .commit(
                lease,
                &mut self.state,
                CommitInput::new(
                    hel_store::Record::Answer,
                    self.conv.messages(),
                    self.conv.leaves(),
                    "/project",
                    hel_store::SessionRecord::of(hel_store::RequestConfig::bare("test", "")),
                )
                .instruction("x")
                .why("test"),
            )
            .expect("the store takes the conversation's leaves");
        self.conv.committed(&committed);
        assert!(self.conv.leaves().iter().all(Option::is_some));
        let loaded = self
            .store
            .load(&committed.id)
            .expect("the checkpoint loads");
        assert_eq!(loaded.messages, self.model.values(), "saved != model");
        self.saved = true;
    }

    /// Resume in a "new process": the lease given up and taken again, the
    /// conversation rebuilt from the checkpoint alone.
    fn resume(&mut self) {
        if !self.saved {
            return;
        }
        let Some(lease) = self.lease.take() else {
            return;
        };
        let session = lease.session().clone();
        drop(lease);
        let (lease, head) = self.store.resume(&session).expect("resume");
        let loaded = self.store.load(&head).expect("the checkpoint loads");
        self.conv = Conversation::restored(loaded.messages, &loaded.leaves);
        self.state = loaded.state;
        self.lease = Some(lease);
        // What was not saved is gone, as after a real restart.
        self.model.msgs = self
            .conv
            .messages()
            .iter()
            .map(|v| Msg {
                value: v.clone(),
                complete: true,
                user: false,
            })
            .collect();
        self.model.open = false;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn conversation_matches_the_model_through_saves_and_resumes(
        ops in prop::collection::vec(op(), 1..40)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let lease = store.new_session().unwrap();
        let mut w = World {
            conv: Conversation::new(),
            model: Model::default(),
            store,
            lease: Some(lease),
            state: SessionState::default(),
            saved: false,
            counter: 0,
        };
        w.apply(&Op::SetSystem);
        for op in &ops {
            w.apply(op);
            prop_assert_eq!(w.conv.messages(), &w.model.values()[..], "after {:?}", op);
            prop_assert_eq!(w.conv.leaves().len(), w.conv.len());
        }
        w.apply(&Op::Save);
        w.apply(&Op::Resume);
        prop_assert_eq!(w.conv.messages(), &w.model.values()[..]);
    }
}
