//! An agent run: configuration, the session (new, resumed or forked), the
//! instructions, a checkpoint after each completed answer.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use hel_store::Store;
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;

use crate::agent::{Agent, Termination};
use crate::cli::RunArgs;
use crate::client::ModelClient;
use crate::compact::Policy;
use crate::config::{self, RequestConfig};
use crate::conversation::Conversation;
use crate::exit::Exit;
use crate::instance::Instance;
use crate::meter::Meter;
use crate::record::Recorder;
use crate::session::{self, Session};
use crate::spill::SpillStore;
use crate::system;
use crate::tools::{cursor::CursorTable, ToolCtx, Toolset};

/// Which session to work on.
pub enum Start {
    New,
    Resume(String),
    Last,
    Fork { session: String, at: String },
}

/// Everything decided before a session exists; errors here are exit 2.
struct Setup {
    config: RequestConfig,
    client: ModelClient,
    toolset: Toolset,
    policy: Option<Policy>,
    project: PathBuf,
}

fn setup(args: &RunArgs) -> Result<Setup, Exit> {
    let endpoint = config::resolve(args)?;
    let toolset = Toolset::select(args.tools.as_deref(), args.access)?;
    let window = args
        .context_window
        .unwrap_or(if endpoint.config.provider == "deepseek" {
            1_000_000
        } else {
            128_000
        });
    let policy = match (args.no_compaction, args.compact_at, args.keep_recent) {
        (true, _, _) => None,
        (false, Some(n), Some(m)) => {
            if m >= n {
                return Err(Exit::usage(format!(
                    "--keep-recent ({m}) must be smaller than --compact-at ({n})"
                )));
            }
            Some(Policy {
                at: n,
                keep_recent: m,
                window,
            })
        }
        _ => Some(Policy::defaults(window, args.max_output_tokens)),
    };
    let project = std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .map_err(|e| Exit::refused(format!("cannot use the current directory: {e}")))?;
    let client = ModelClient::new(&endpoint, args.request_timeout)
        .map_err(|e| Exit::refused(e.to_string()))?;
    let mut config = endpoint.config;
    config.tools = toolset.definitions();
    config.compaction = serde_json::to_value(policy).unwrap_or_default();
    Ok(Setup {
        config,
        client,
        toolset,
        policy,
        project,
    })
}

/// Take the session to work on; returns it and, for a resume or fork, the
/// checkpoint to continue from.
fn open_session(
    store: &Store,
    setup: &Setup,
    start: &Start,
) -> Result<(Session, Option<hel_store::ObjectId>), Exit> {
    let cwd = setup.project.to_string_lossy().into_owned();
    let make = |lease, head| {
        (
            Session {
                store: store.clone(),
                lease: Arc::new(lease),
                state: hel_store::SessionState::default(),
                cwd: cwd.clone(),
            },
            head,
        )
    };
    match start {
        Start::New => Ok(make(store.new_session()?, None)),
        Start::Resume(spec) => {
            let id = session::resolve(store, &setup.project, spec)?;
            let (lease, head) = store.resume(&id)?;
            Ok(make(lease, Some(head)))
        }
        Start::Last => {
            let last = store
                .sessions()?
                .into_iter()
                .find(|s| !s.busy && s.head.is_some() && s.broken.is_none())
                .ok_or_else(|| {
                    Exit::refused("no session of this project can be resumed (none, or all in use)")
                })?;
            let (lease, head) = store.resume(&last.id)?;
            Ok(make(lease, Some(head)))
        }
        Start::Fork { session: spec, at } => {
            let id = session::resolve(store, &setup.project, spec)?;
            let log = store.log(&id)?;
            let checkpoint = session::resolve_checkpoint(&log, at)?;
            let (lease, first, warnings) = store.fork(&checkpoint)?;
            for w in warnings {
                crate::note!("hel: warning: {w}");
            }
            Ok(make(lease, Some(first)))
        }
    }
}

/// Run hel as an agent. Returns the exit code.
pub async fn run(args: RunArgs, start: Start) -> Result<u8, Exit> {
    let setup = setup(&args)?;
    let from_stdin = args.instructions.is_empty();
    let allow_write = crate::tools::sandbox::check_allow_write(
        &args.allow_write,
        &setup.project,
        &crate::instance::runtime_root(),
    )
    .map_err(Exit::usage)?;
    let instance = Instance::start()
        .map_err(|e| Exit::refused(format!("cannot create the instance directory: {e}")))?;
    let store = Store::open(&setup.project)?;
    let opened = match open_session(&store, &setup, &start) {
        Ok(s) => Some(s),
        Err(e) if matches!(start, Start::New) => {
            crate::note!("hel: warning: cannot create a session in {} ({e}); this conversation will not be saved", store.root_path().display());
            None
        }
        Err(e) => return Err(e),
    };
    let (mut session, head) = match opened {
        Some((s, h)) => (Some(s), h),
        None => (None, None),
    };
    match &session {
        Some(s) => crate::note!("session: {}", s.id()),
        None => crate::note!("session: none"),
    }
    let mut recorder = match &args.record {
        Some(dir) => Some(Recorder::create(dir, &setup.config.model).map_err(|e| {
            Exit::refused(format!("cannot write the record to {}: {e}", dir.display()))
        })?),
        None => None,
    };
    if let (Some(rec), Some(s)) = (recorder.as_mut(), &session) {
        rec.set("session_id", Value::String(s.id().to_string()));
    }
    let sandbox = !args.no_sandbox;
    if args.no_sandbox && setup.toolset.names.contains(&"bash") {
        crate::note!(
            "hel: warning: --no-sandbox: bash commands run unconfined, with your permissions"
        );
    }
    let spill = match &session {
        Some(s) => SpillStore::for_session(&store, Arc::clone(&s.lease)),
        None => SpillStore::for_instance(&instance.spill()),
    };
    let project_dir = crate::tools::paths::ProjectDir::open(&setup.project)
        .map_err(|e| Exit::refused(format!("cannot open the project directory: {e}")))?;
    let tools = ToolCtx {
        project: setup.project.clone(),
        project_dir,
        access: args.access,
        bash_timeout: args.bash_timeout,
        sandbox,
        allow_write,
        tmp: instance.tmp(),
        commands: Default::default(),
        cursors: CursorTable::default(),
        spill,
    };
    let (tx, interrupts) = watch::channel(0u64);
    tokio::spawn(async move {
        let mut n = 0;
        while tokio::signal::ctrl_c().await.is_ok() {
            n += 1;
            let _ = tx.send(n);
        }
    });
    let context_file = (!args.no_context_file).then_some(args.context_file.as_str());
    let system_message = system::build(&tools.project_dir, context_file, &setup.toolset.names);
    let mut agent = Agent::new(
        setup.config.clone(),
        setup.client,
        setup.toolset.clone(),
        tools,
        recorder,
        setup.policy,
        args.max_turns,
        interrupts.clone(),
    );
    agent.conversation.push(system_message);

    if let (Some(s), Some(head)) = (session.as_mut(), head) {
        restore(s, &mut agent, head)?;
    }

    let mut failed = false;
    let mut instructions = args.instructions.clone().into_iter();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        let text = if from_stdin {
            let seen = *interrupts.borrow();
            let mut rx = interrupts.clone();
            let line = tokio::select! {
                l = stdin.next_line() => l,
                _ = async { while rx.changed().await.is_ok() { if *rx.borrow() > seen { break; } } } => {
                    finish(&mut agent, &instance, session.as_ref());
                    return Ok(130);
                }
            };
            match line {
                Ok(Some(l)) if l.trim() == "/exit" => break,
                Ok(Some(l)) if l.trim().is_empty() => continue,
                Ok(Some(l)) => l,
                Ok(None) => break,
                Err(e) => {
                    crate::note!("hel: cannot read stdin: {e}");
                    failed = true;
                    break;
                }
            }
        } else {
            match instructions.next() {
                Some(t) => t,
                None => break,
            }
        };
        let outcome = agent.run_instruction(&text).await;
        if let Some(rec) = agent.recorder.as_mut() {
            rec.instruction(
                outcome.termination.name(),
                outcome.answer.as_deref(),
                outcome.error.as_deref(),
            );
        }
        match outcome.termination {
            Termination::Completed => {
                // Saved before it is shown: an answer on screen is an answer on disk.
                if let Some(s) = session.as_mut() {
                    match s.checkpoint(&mut agent, &text) {
                        Ok(c) => {
                            for w in c.warnings {
                                crate::note!("hel: warning: {w}");
                            }
                        }
                        Err(e) => crate::note!("hel: warning: could not save a checkpoint ({e}); the conversation goes on in memory and the next answer saves it all"),
                    }
                }
                let answer = outcome.answer.unwrap_or_default();
                let mut out = std::io::stdout().lock();
                // On a terminal the model's escape sequences are shown, not obeyed;
                // into a pipe or file the answer goes byte for byte.
                let _ = if out.is_terminal() {
                    writeln!(out, "{}", crate::terminal::escape_text(&answer))
                } else {
                    writeln!(out, "{answer}")
                };
                let _ = out.flush();
            }
            t => {
                crate::note!(
                    "hel: instruction incomplete ({}): {}",
                    t.name(),
                    outcome.error.unwrap_or_default()
                );
                failed = true;
                if t == Termination::Interrupted && !from_stdin {
                    finish(&mut agent, &instance, session.as_ref());
                    return Ok(130);
                }
                if !from_stdin {
                    break;
                }
            }
        }
    }
    finish(&mut agent, &instance, session.as_ref());
    Ok(if failed { 1 } else { 0 })
}

fn finish(agent: &mut Agent, instance: &Instance, session: Option<&Session>) {
    if let Some(rec) = agent.recorder.as_mut() {
        rec.flush();
    }
    // Every process a command started ends before tmp and spill go.
    agent.tools.commands.shutdown();
    if let Some(s) = session {
        // Spill working copies are a cache of the committed blobs.
        if let Err(e) = s.store.clear_spill(&s.lease) {
            crate::note!("hel: warning: cannot remove spill working copies: {e}");
        }
    }
    instance.finish();
}

/// Continue from checkpoint `head`: load it (validated), check it belongs
/// here, rebuild the system message, apply the current config, and restore
/// the Meter (when the rule allows), the cursors and the spill map.
fn restore(
    session: &mut Session,
    agent: &mut Agent,
    head: hel_store::ObjectId,
) -> Result<(), Exit> {
    let hel_store::Loaded {
        checkpoint: cp,
        messages,
        leaves,
        state,
        request_config,
        cursors,
    } = session.store.load(&head)?;
    session::verify(&cp, session.id(), &session.cwd)?;
    let fresh_system = agent.conversation.messages()[0].clone();
    agent.conversation = Conversation::restored(messages, &leaves);
    let system_changed = agent.conversation.set_system(fresh_system);
    session.state = state;

    let saved: Option<RequestConfig> = serde_json::from_value(request_config).ok();
    let same_signature = saved
        .as_ref()
        .is_some_and(|s| s.signature() == agent.config.signature());
    if let Some(saved) = &saved {
        let mut diffs = Vec::new();
        if saved.model != agent.config.model || saved.provider != agent.config.provider {
            diffs.push(format!(
                "model {}/{} → {}/{}",
                saved.provider, saved.model, agent.config.provider, agent.config.model
            ));
        }
        if saved.tools != agent.config.tools {
            diffs.push("toolset changed".to_owned());
        }
        if saved.params != agent.config.params {
            diffs.push("params changed".to_owned());
        }
        if saved.max_output_tokens != agent.config.max_output_tokens {
            diffs.push(format!(
                "output limit {} → {}",
                saved.max_output_tokens, agent.config.max_output_tokens
            ));
        }
        if !diffs.is_empty() {
            crate::note!("hel: note: continuing with the current settings ({}); the saved ones stay in the checkpoint", diffs.join(", "));
        }
    }
    let meter: Meter = serde_json::from_value(cp.meter.clone()).unwrap_or_default();
    let keep = !system_changed && same_signature && meter.is_observed();
    agent.meter = if keep { meter } else { Meter::default() };
    if let Some(rec) = agent.recorder.as_mut() {
        rec.set("meter_restored", Value::Bool(keep));
    }
    agent.tools.cursors = serde_json::from_value(cursors).unwrap_or_else(|_| {
        crate::note!(
            "hel: warning: the saved read_file cursors could not be read; reads start over"
        );
        CursorTable::default()
    });
    agent.tools.spill.set_committed(&cp.spill);
    agent.tools.spill.materialize();
    Ok(())
}
