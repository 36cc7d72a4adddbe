//! The small commands of the prompt, through a pseudo-terminal against
//! hel-mock: `/access` and Shift-Tab changing the approval mode (a write
//! is asked about, or not, accordingly), `/model` listing the server's
//! models, Tab listing several completions, `/init` asking the model for
//! AGENTS.md; and `hel mcp add` / `remove` writing the user's config file.

use serde_json::{json, Value};

use crate::common::*;
use crate::t_prompt::{
    all_fit, exited_with, expect, screen_lines, spawn_with, type_in, PROMPT_END,
};

/// Shift-Tab as a terminal sends it.
const SHIFT_TAB: &str = "\x1b[Z";

fn write_call(path: &str) -> Value {
    json!({"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": "x\n"}}]})
}

/// The newest user message the mock was sent.
fn last_user(mock: &Mock) -> String {
    let reqs = mock.requests();
    let msgs = reqs.last().unwrap()["messages"].as_array().unwrap().clone();
    msgs.iter().rev().find(|m| m["role"] == "user").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `/access` shows the mode and the choices; `/access auto` lets a write
/// run unasked; Shift-Tab goes on to read-only (a write is refused, not
/// asked) and back to confirm (a write is asked about), keeping what was
/// typed; the prompt names the mode when it is not confirm.
#[test]
fn access_switches_the_mode_and_writes_follow_it() {
    let p = Project::new();
    let mock = Mock::start(json!([
        write_call("a.txt"),
        {"content": "done a"},
        write_call("c.txt"),
        {"content": "done c"},
        write_call("b.txt"),
        {"content": "done b"},
    ]));
    let mut s = spawn_with(&p, Some(&mock), 80, &[], &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/access\r");
    let shown = expect(&mut s, PROMPT_END);
    let lines = screen_lines(&shown);
    let at = lines
        .iter()
        .position(|l| l == "hel: access confirm; /access MODE or Shift-Tab changes it:")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(
        lines[at + 1..at + 4],
        [
            "* confirm    writes and commands are asked about first",
            "  auto       writes and commands run without asking",
            "  read-only  only the reading tools run",
        ]
    );

    type_in(&mut s, "/access auto\r");
    expect(
        &mut s,
        "hel: access auto: writes and commands run without asking",
    );
    expect(
        &mut s,
        "hel: sandboxed commands get no network now (--network gives it)",
    );
    expect(&mut s, "· auto · ");
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "write a\r");
    let seen = expect(&mut s, "done a");
    assert!(
        !seen.contains("allow write_file"),
        "asked under auto: {seen}"
    );
    expect(&mut s, PROMPT_END);
    assert!(p.path().join("a.txt").exists());

    // Shift-Tab: read-only; the write is refused without a question.
    type_in(&mut s, SHIFT_TAB);
    expect(&mut s, "hel: access read-only: only the reading tools run");
    let seen = expect(&mut s, "· read-only · ");
    assert!(!seen.contains("network"), "{seen}");
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "write c\r");
    let seen = expect(&mut s, "done c");
    assert!(!seen.contains("allow write_file"), "{seen}");
    assert!(!p.path().join("c.txt").exists());
    let results = tool_results(&mock, 3);
    assert!(results.last().unwrap().contains("read-only"), "{results:?}");
    expect(&mut s, PROMPT_END);

    // Half an instruction typed, Shift-Tab (confirm again), the rest: one
    // instruction, and its write is asked about.
    type_in(&mut s, "wri");
    type_in(&mut s, SHIFT_TAB);
    expect(
        &mut s,
        "hel: access confirm: writes and commands are asked about first",
    );
    expect(
        &mut s,
        "hel: sandboxed commands may use the network now (--no-network keeps them off it)",
    );
    expect(&mut s, &format!("{PROMPT_END}wri"));
    type_in(&mut s, "te b\r");
    expect(&mut s, "allow write_file b.txt?");
    type_in(&mut s, "n\r");
    expect(&mut s, "done b");
    expect(&mut s, PROMPT_END);
    assert_eq!(last_user(&mock), "write b");
    assert!(!p.path().join("b.txt").exists());
    type_in(&mut s, "/access sideways\r");
    expect(
        &mut s,
        "hel: no access mode sideways: read-only, confirm or auto",
    );
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// A run started read-only offers no writing tool: switching to auto
/// starts it again on its session, and the write then runs.
#[test]
fn access_from_a_read_only_start_offers_the_writing_tools() {
    let p = Project::new();
    let mock = Mock::start(json!([
        {"content": "first"},
        write_call("w.txt"),
        {"content": "written"},
    ]));
    let mut s = spawn_with(&p, Some(&mock), 80, &["--access", "read-only"], &[]);
    expect(&mut s, "· read-only · ");
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "hello\r");
    expect(&mut s, "first");
    expect(&mut s, PROMPT_END);
    let tools = |i: usize| -> Vec<String> {
        mock.requests()[i]["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|d| d["function"]["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(!tools(0).contains(&"write_file".to_owned()));
    type_in(&mut s, "/access auto\r");
    expect(&mut s, "hel: access auto");
    expect(&mut s, "· auto · ");
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "write it\r");
    expect(&mut s, "written");
    expect(&mut s, PROMPT_END);
    assert!(tools(1).contains(&"write_file".to_owned()));
    assert!(p.path().join("w.txt").exists());
    // The same session went on: the first exchange is in the request.
    let sent = mock.requests()[1].to_string();
    assert!(sent.contains("hello") && sent.contains("first"), "{sent}");
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// `/model` lists what `GET /models` offers, the current model marked; a
/// server without the endpoint gets one line saying so.
#[test]
fn model_lists_the_servers_models() {
    let p = Project::new();
    let mock = Mock::with_models(json!([]), &["other-model", "mock-model", "big-model"]);
    let mut s = spawn_with(&p, Some(&mock), 80, &[], &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/model\r");
    let lines = screen_lines(&expect(&mut s, PROMPT_END));
    let at = lines
        .iter()
        .position(|l| l == "hel: the server offers 3 models; /model NAME switches:")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(
        lines[at + 1..at + 4],
        ["  big-model", "* mock-model", "  other-model"]
    );
    type_in(&mut s, "/model big-model\r");
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/model\r");
    expect(&mut s, "* big-model");
    expect(&mut s, PROMPT_END);
    assert!(mock.requests().is_empty(), "no chat request was made");
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();

    let bare = Mock::start(json!([]));
    let mut s = spawn_with(&p, Some(&bare), 80, &[], &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/model\r");
    let lines = screen_lines(&expect(&mut s, PROMPT_END));
    assert!(
        lines
            .iter()
            .any(|l| l == "hel: cannot list the server's models (HTTP 404); /model NAME sets one"),
        "{lines:#?}"
    );
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// Tab with several matches lists them all under the line (in columns
/// that fit the width); with one, it completes.
#[test]
fn tab_lists_several_completions() {
    for cols in [80u16, 40] {
        let p = Project::new();
        p.write("alpha.txt", "a\n");
        p.write("alps.txt", "b\n");
        let mock = Mock::start(json!([{"content": "seen"}]));
        let mut s = spawn_with(&p, Some(&mock), cols, &[], &[]);
        expect(&mut s, PROMPT_END);
        type_in(&mut s, "/re\t");
        let listed = screen_lines(&expect(&mut s, "/rewind"));
        let last = format!("{}/rewind", listed.last().unwrap());
        for name in ["/rename", "/resume", "/retry", "/rewind"] {
            assert!(last.contains(name), "{cols}: {listed:#?}");
        }
        all_fit(&listed, cols as usize, "the listing");
        // The line comes back as it was; clear it.
        expect(&mut s, &format!("{PROMPT_END}/re"));
        type_in(&mut s, "\x15");
        // A path: the common part is completed, both files listed.
        type_in(&mut s, "look at @al\t");
        let listed = screen_lines(&expect(&mut s, "@alps.txt"));
        assert!(
            listed.last().unwrap().contains("@alpha.txt"),
            "{cols}: {listed:#?}"
        );
        expect(&mut s, &format!("{PROMPT_END}look at @alp"));
        // One match completes.
        type_in(&mut s, "h\t\r");
        expect(&mut s, "seen");
        expect(&mut s, PROMPT_END);
        assert!(
            last_user(&mock).starts_with("look at @alpha.txt"),
            "{}",
            last_user(&mock)
        );
        type_in(&mut s, "/exit\r");
        s.exp_eof().unwrap();
        exited_with(&s, 0);
    }
}

/// `/init` sends an instruction asking the model to look at the project
/// and write AGENTS.md (to improve it when there is one); hel itself
/// writes nothing.
#[test]
fn init_asks_the_model_for_agents_md() {
    let p = Project::new();
    std::fs::create_dir_all(p.path().join("src")).unwrap();
    p.write("Cargo.toml", "[package]\n");
    let mock = Mock::start(json!([
        {"content": "I would write it now."},
        {"content": "I would improve it."},
    ]));
    let mut s = spawn_with(&p, Some(&mock), 80, &[], &[]);
    expect(&mut s, PROMPT_END);
    type_in(&mut s, "/init\r");
    expect(&mut s, "I would write it now.");
    expect(&mut s, PROMPT_END);
    let asked = last_user(&mock);
    assert!(
        asked.contains("write AGENTS.md at the project's root")
            && asked.contains("build files")
            && asked.contains("README"),
        "{asked}"
    );
    assert!(!p.path().join("AGENTS.md").exists(), "hel wrote no file");
    p.write("AGENTS.md", "# Old\n");
    type_in(&mut s, "/init\r");
    expect(&mut s, "I would improve it.");
    expect(&mut s, PROMPT_END);
    let asked = last_user(&mock);
    assert!(
        asked.contains("AGENTS.md already exists") && asked.contains("improve it"),
        "{asked}"
    );
    assert_eq!(
        std::fs::read_to_string(p.path().join("AGENTS.md")).unwrap(),
        "# Old\n"
    );
    type_in(&mut s, "/exit\r");
    s.exp_eof().unwrap();
    exited_with(&s, 0);
}

/// `hel mcp add` writes the entry into the user's config file (the rest
/// of it kept), `hel mcp list` then has it; a second add of the name is
/// refused unless `--force`; `hel mcp remove` takes it out.
#[test]
fn mcp_add_writes_the_users_config() {
    let p = Project::new();
    let config = p.home.path().join(".config/hel/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "# mine\nmax_turns_unused = 1\n").unwrap();
    // A config hel would refuse is left as it is.
    let run = p.run(None, &["mcp", "add", "calc", "--", "python3", "/x.py"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    std::fs::write(&config, "# mine\nmodel = \"m\"\n").unwrap();

    let run = p.run(
        None,
        &[
            "mcp",
            "add",
            "calc",
            "--env",
            "PRECISION=10",
            "--",
            "no-such-mcp-server",
            "/opt/calc.py",
            "--flag",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let entry = "[mcp_servers.calc]\ncommand = \"no-such-mcp-server\"\nargs = [\"/opt/calc.py\", \"--flag\"]\nenv = { PRECISION = \"10\" }\n";
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        format!("# mine\nmodel = \"m\"\n\n{entry}")
    );
    assert!(run.stdout.contains(entry), "{}", run.stdout);
    assert!(run.stdout.contains("hel mcp remove calc"), "{}", run.stdout);
    assert!(
        !p.path().join(".hel").exists() && std::fs::read_dir(p.path()).unwrap().next().is_none()
    );

    let list = p.run(None, &["mcp", "list", "--json"]);
    let v: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(v["servers"][0]["name"], "calc");
    assert_eq!(
        v["servers"][0]["target"],
        "no-such-mcp-server /opt/calc.py --flag"
    );

    let again = p.run(None, &["mcp", "add", "calc", "--", "other"]);
    assert_eq!(again.code, 2);
    assert!(
        again
            .stderr
            .contains("there is an MCP server `calc` already"),
        "{}",
        again.stderr
    );
    assert!(std::fs::read_to_string(&config).unwrap().contains(entry));
    let secret = p.run(
        None,
        &["mcp", "add", "s", "--env", "API_TOKEN=x", "--", "y"],
    );
    assert_eq!(secret.code, 2);
    assert!(!std::fs::read_to_string(&config)
        .unwrap()
        .contains("API_TOKEN"));

    let forced = p.run(None, &["mcp", "add", "calc", "--force", "--", "other"]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.contains("[mcp_servers.calc]\ncommand = \"other\"\n") && !text.contains("PRECISION"),
        "{text}"
    );

    let removed = p.run(None, &["mcp", "remove", "calc"]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        !text.contains("calc") && text.starts_with("# mine\nmodel = \"m\"\n"),
        "{text}"
    );
    assert_eq!(p.run(None, &["mcp", "remove", "calc"]).code, 2);
}
