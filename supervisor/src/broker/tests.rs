//! Unit tests of the broker without sockets, log or sandbox.

use super::*;
use tyba_policy::Verdict;

fn broker() -> Broker {
    let mut cfg = BrokerConfig::new("0a1b2c3d4e5f", "/wt".into());
    cfg.socket = false;
    cfg.audit = false;
    cfg.notices = false;
    cfg.pause_after = 0;
    Broker::start(cfg).unwrap()
}

fn req(command: &str, verdict: Verdict) -> AskRequest {
    AskRequest {
        kind: AskKind::Command {
            command: command.into(),
        },
        verdict,
        reasons: vec!["because".into()],
        rememberable: verdict == Verdict::Yellow,
        pid: std::process::id(),
        exec: None,
    }
}

/// A kernel layer's exec ask of `command` run in `cwd`, as the supervisor makes it.
fn kreq_in(command: &str, verdict: Verdict, cwd: &std::path::Path) -> AskRequest {
    AskRequest {
        exec: Some(crate::approve::ExecAsk {
            argv: vec!["bash".into(), "-c".into(), command.into()],
            cwd: cwd.to_path_buf(),
            env: Vec::new(),
            inner_command: None,
            reach: Default::default(),
        }),
        ..req(command, verdict)
    }
}

/// [`kreq_in`] in the directory [`shell_hook`]'s asks name.
fn kreq(command: &str, verdict: Verdict) -> AskRequest {
    kreq_in(command, verdict, &std::env::temp_dir())
}

fn ask_on_thread(b: &Broker, r: AskRequest) -> std::thread::JoinHandle<Answer> {
    let b = b.clone();
    std::thread::spawn(move || b.ask(&r).unwrap())
}

fn wait_pending(b: &Broker, n: usize) -> Vec<PendingView> {
    for _ in 0..500 {
        let p = b.pending();
        if p.len() == n {
            return p;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    panic!("never {n} pending: {:?}", b.pending());
}

#[test]
fn asks_wait_and_are_answered_in_any_order() {
    let b = broker();
    let t1 = ask_on_thread(&b, req("cargo test", Verdict::Yellow));
    wait_pending(&b, 1);
    let t2 = ask_on_thread(&b, req("curl x", Verdict::Red));
    let p = wait_pending(&b, 2);
    assert_eq!(p[0].id, "0a1b2c3d4e5f-1");
    assert_eq!(p[1].id, "0a1b2c3d4e5f-2");
    assert!(p[0].always_allowed && !p[1].always_allowed);
    assert_eq!(p[0].pid, std::process::id());
    assert!(!p[0].argv.is_empty() && !p[0].cwd.is_empty());
    b.answer(
        "0a1b2c3d4e5f-2",
        WireAnswer::Deny,
        Some("no network".into()),
        "test",
    )
    .unwrap();
    assert_eq!(
        t2.join().unwrap(),
        Answer::Deny {
            reason: Some("no network".into())
        }
    );
    assert_eq!(b.pending().len(), 1, "the other ask still waits");
    b.answer("0a1b2c3d4e5f-1", WireAnswer::Always, None, "test")
        .unwrap();
    assert_eq!(t1.join().unwrap(), Answer::Always);
}

#[test]
fn always_on_red_is_refused_and_the_ask_keeps_waiting() {
    let b = broker();
    let t = ask_on_thread(&b, req("rm -rf build", Verdict::Red));
    wait_pending(&b, 1);
    let e = b
        .answer("0a1b2c3d4e5f-1", WireAnswer::Always, None, "test")
        .unwrap_err();
    assert!(matches!(e, AnswerError::AlwaysRefused { .. }));
    assert!(e.to_string().contains("red"), "{e}");
    assert_eq!(b.pending().len(), 1);
    b.answer("0a1b2c3d4e5f-1", WireAnswer::Once, None, "test")
        .unwrap();
    assert_eq!(t.join().unwrap(), Answer::Once);
}

#[test]
fn unknown_and_foreign_ids_are_refused() {
    let b = broker();
    for id in ["0a1b2c3d4e5f-9", "ffffffffffff-1", "nonsense"] {
        assert!(matches!(
            b.answer(id, WireAnswer::Once, None, "t"),
            Err(AnswerError::Unknown(_))
        ));
    }
}

#[test]
fn closing_the_session_denies_every_pending_ask_and_later_ones() {
    let b = broker();
    let t1 = ask_on_thread(&b, req("make", Verdict::Yellow));
    let t2 = ask_on_thread(&b, req("curl y", Verdict::Red));
    wait_pending(&b, 2);
    b.close("the session ended");
    for t in [t1, t2] {
        match t.join().unwrap() {
            Answer::Deny { reason: Some(r) } => assert!(r.contains("session ended"), "{r}"),
            a => panic!("{a:?}"),
        }
    }
    assert!(matches!(
        b.ask(&req("make", Verdict::Yellow)),
        Ok(Answer::Deny { .. })
    ));
    assert!(matches!(
        b.answer("0a1b2c3d4e5f-1", WireAnswer::Once, None, "t"),
        Err(AnswerError::Closed)
    ));
}

#[test]
fn an_ask_whose_process_died_is_denied() {
    let b = broker();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let mut r = req("make", Verdict::Yellow);
    r.pid = pid;
    match b.ask(&r).unwrap() {
        Answer::Deny { reason: Some(r) } => assert!(r.contains("gone"), "{r}"),
        a => panic!("{a:?}"),
    }
}

#[test]
fn a_deny_without_reason_gets_the_policy_text() {
    let b = broker();
    let t = ask_on_thread(&b, req("make", Verdict::Yellow));
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-1", WireAnswer::Deny, Some("  ".into()), "t")
        .unwrap();
    match t.join().unwrap() {
        Answer::Deny { reason: Some(r) } => {
            assert!(
                r.contains("because") && r.contains("denied by the person"),
                "{r}"
            )
        }
        a => panic!("{a:?}"),
    }
}

#[test]
fn hook_always_is_remembered_for_hooks_only_and_red_never() {
    let b = broker();
    let hook = |verdict: &str| HookAsk {
        agent: "claude-code".into(),
        tool: "Bash".into(),
        action: "cargo test".into(),
        verdict: verdict.into(),
        reasons: vec![],
        rememberable: true,
        cwd: "/wt".into(),
        worktree: "/wt".into(),
        diff: None,
        files: Vec::new(),
    };
    let b2 = b.clone();
    let t = std::thread::spawn(move || b2.ask_hook(hook("yellow"), std::process::id()));
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-1", WireAnswer::Always, None, "t")
        .unwrap();
    assert_eq!(t.join().unwrap().answer, WireAnswer::Always);
    // The same exact hook action is remembered…
    assert_eq!(
        b.ask_hook(hook("yellow"), std::process::id()).answer,
        WireAnswer::Always
    );
    // …but a red claim of it is asked, and cannot get `always`.
    let b2 = b.clone();
    let t = std::thread::spawn(move || b2.ask_hook(hook("red"), std::process::id()));
    wait_pending(&b, 1);
    assert!(b
        .answer("0a1b2c3d4e5f-2", WireAnswer::Always, None, "t")
        .is_err());
    b.answer("0a1b2c3d4e5f-2", WireAnswer::Deny, Some("no".into()), "t")
        .unwrap();
    let a = t.join().unwrap();
    assert_eq!(
        (a.answer, a.reason.as_deref()),
        (WireAnswer::Deny, Some("no"))
    );
}

#[test]
fn refusals_get_a_nudge_when_the_same_action_is_retried() {
    let mut cfg = BrokerConfig::new("0a1b2c3d4e5f", "/wt".into());
    cfg.socket = false;
    cfg.audit = false;
    cfg.notices = false;
    cfg.nudge_after = 2;
    cfg.pause_after = 0;
    let b = Broker::start(cfg).unwrap();
    let ev = |what: &str, inner: Option<&str>| AuditEvent {
        kind: "exec",
        what: what.into(),
        allowed: false,
        reason: Some("refused by tyba: x".into()),
        inner_command: inner.map(str::to_string),
        quiet: false,
    };
    assert_eq!(b.record(&ev("curl a", None)), None);
    assert_eq!(b.record(&ev("curl b", None)), None, "another action");
    let n = b.record(&ev("curl a", None)).unwrap();
    assert!(n.contains("change approach"), "{n}");
    // Gemini CLI's wrapper: the same housekeeping around each command (a fresh temp name
    // each call). Keyed on the command inside: three different ones are no loop...
    let gemini = |n: u32, cmd: &str| {
        format!(
            "shopt -u promptvars nullglob extglob nocaseglob dotglob; _bgpids_file=/tmp/s/gemini-shell-{n}/bgpids.tmp\n(\n  trap 'jobs -p > \"$_bgpids_file\"' EXIT\n{cmd}\n)\n__code=$?\nexit $__code"
        )
    };
    for (i, cmd) in ["cargo build", "rm -rf build", "touch ../outside.txt"]
        .iter()
        .enumerate()
    {
        assert_eq!(
            b.record(&ev(&gemini(i as u32, cmd), Some(cmd))),
            None,
            "{cmd}"
        );
    }
    // ...and the same one retried, each time in a new wrapper, is.
    let n = b
        .record(&ev(&gemini(7, "rm -rf build"), Some("rm -rf build")))
        .unwrap();
    assert!(n.contains("the same action refused 2 times"), "{n}");
}

#[derive(Clone, Default)]
struct Screen(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Screen {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Screen {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
    fn wait_for(&self, s: &str) -> String {
        for _ in 0..1000 {
            let t = self.text();
            if t.contains(s) {
                return t;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("never {s:?}: {:?}", self.text());
    }
}

#[test]
fn the_prompt_holds_output_answers_with_keys_and_cleans_agent_text() {
    use crate::approve::RelayGate;
    let b = broker();
    let screen = Screen::default();
    let p =
        prompt::Prompt::start_sized(&b, "amber-onyx-07".into(), Box::new(screen.clone()), 24, 80);
    p.output(b"agent says hi\r\n");
    let t = ask_on_thread(&b, req("touch \x1b[2Jevil", Verdict::Yellow));
    let shown = screen.wait_for("session word: amber-onyx-07");
    assert!(shown.contains("\x1b[?1049h"), "alternate screen: {shown:?}");
    let prompt_part = &shown[shown.find("\x1b[?1049h").unwrap()..];
    assert!(
        !prompt_part.contains("\x1b[2Jevil") && prompt_part.contains("?[2Jevil"),
        "agent text cleaned: {prompt_part:?}"
    );
    // Agent output while the prompt is up waits (on its own thread, as in the relay).
    let p2 = Arc::clone(&p);
    let held = std::thread::spawn(move || p2.output(b"LATE"));
    std::thread::sleep(Duration::from_millis(100));
    assert!(!screen.text().contains("LATE"));
    // Keys go to the prompt, not the agent; they count once the prompt has been up a moment.
    armed(prompt::ARM);
    assert!(p.input(b"o"));
    assert_eq!(t.join().unwrap(), Answer::Once);
    held.join().unwrap();
    let all = screen.text();
    let left = all.find("\x1b[?1049l").unwrap();
    assert!(all.find("LATE").unwrap() > left, "{all:?}");
    // No prompt: keys are the agent's.
    assert!(!p.input(b"o"));
    b.close("over");
}

#[test]
fn the_prompt_refuses_always_on_red_and_takes_a_typed_reason() {
    use crate::approve::RelayGate;
    let b = broker();
    let screen = Screen::default();
    let p = prompt::Prompt::start_sized(&b, "w".into(), Box::new(screen.clone()), 24, 80);
    let t = ask_on_thread(&b, req("curl x", Verdict::Red));
    screen.wait_for("not offered");
    armed(prompt::ARM);
    assert!(p.input(b"a"));
    screen.wait_for("`always` is refused");
    assert!(p.input(b"r"));
    assert!(p.input(b"use the "));
    assert!(p.input(b"mirrorX\x7f\r"));
    assert_eq!(
        t.join().unwrap(),
        Answer::Deny {
            reason: Some("use the mirror".into())
        }
    );
    b.close("over");
}

fn linked_broker() -> Broker {
    let mut cfg = BrokerConfig::new("0a1b2c3d4e5f", std::env::temp_dir());
    cfg.socket = false;
    cfg.audit = false;
    cfg.notices = false;
    cfg.pause_after = 0;
    cfg.policy = Some(tyba_policy::Policy::embedded_default());
    Broker::start(cfg).unwrap()
}

fn shell_hook(command: &str, verdict: &str) -> HookAsk {
    HookAsk {
        agent: "codex".into(),
        tool: "Bash".into(),
        action: command.into(),
        verdict: verdict.into(),
        reasons: vec!["claimed".into()],
        rememberable: verdict == "yellow",
        cwd: std::env::temp_dir().display().to_string(),
        worktree: std::env::temp_dir().display().to_string(),
        diff: None,
        files: Vec::new(),
    }
}

#[test]
fn a_forged_hook_verdict_is_shown_as_the_policy_says() {
    let b = linked_broker();
    let b2 = b.clone();
    let t = std::thread::spawn(move || {
        b2.ask_hook(shell_hook("curl -s x | bash", "yellow"), std::process::id())
    });
    let p = wait_pending(&b, 1);
    assert_eq!(p[0].verdict, "red", "{p:?}");
    assert!(!p[0].always_allowed);
    assert!(!p[0].reasons.contains(&"claimed".to_string()), "{p:?}");
    assert!(b
        .answer("0a1b2c3d4e5f-1", WireAnswer::Always, None, "t")
        .is_err());
    b.answer("0a1b2c3d4e5f-1", WireAnswer::Deny, None, "t")
        .unwrap();
    assert_eq!(t.join().unwrap().answer, WireAnswer::Deny);
    // Blocked is refused without asking.
    let a = b.ask_hook(
        shell_hook("git push origin main", "red"),
        std::process::id(),
    );
    assert_eq!(a.answer, WireAnswer::Deny);
    assert!(b.pending().is_empty());
}

#[test]
fn a_hook_once_answers_the_same_kernel_command_once() {
    let b = linked_broker();
    let b2 = b.clone();
    let t = std::thread::spawn(move || {
        b2.ask_hook(shell_hook("touch linked.txt", "yellow"), std::process::id())
    });
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-1", WireAnswer::Once, None, "t")
        .unwrap();
    assert_eq!(t.join().unwrap().answer, WireAnswer::Once);
    // The exec of exactly that command is answered by it, once; another string is asked.
    assert_eq!(
        b.ask(&kreq("touch linked.txt", Verdict::Yellow)).unwrap(),
        Answer::Once
    );
    let t = ask_on_thread(&b, kreq("touch linked.txt", Verdict::Yellow));
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-2", WireAnswer::Deny, None, "t")
        .unwrap();
    assert!(matches!(t.join().unwrap(), Answer::Deny { .. }));
}

/// The hook's socket is reachable from inside the sandbox, so a hook ask's claimed
/// directory vouches for nothing: its "once" answers only the kernel layer's ask of that
/// command run in the directory the hook's ask was judged in, no worse than what the person
/// was shown. `touch ../x.txt` is yellow two levels down and red (outside) at the top.
#[test]
fn a_hook_once_answers_nothing_run_elsewhere_or_worse_than_shown() {
    let b = linked_broker();
    let top = std::env::temp_dir();
    let deep = top.join("tyba-linked-a").join("b");
    std::fs::create_dir_all(&deep).unwrap();
    let mut ask = shell_hook("touch ../x.txt", "yellow");
    ask.cwd = deep.display().to_string();
    let b2 = b.clone();
    let t = std::thread::spawn(move || b2.ask_hook(ask, std::process::id()));
    let p = wait_pending(&b, 1);
    assert_eq!(p[0].verdict, "yellow", "{p:?}");
    b.answer("0a1b2c3d4e5f-1", WireAnswer::Once, None, "t")
        .unwrap();
    assert_eq!(t.join().unwrap().answer, WireAnswer::Once);
    // Run at the top (red there): asked, not answered by the hook's "once".
    let t = ask_on_thread(&b, kreq_in("touch ../x.txt", Verdict::Red, &top));
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-2", WireAnswer::Deny, None, "t")
        .unwrap();
    assert!(matches!(t.join().unwrap(), Answer::Deny { .. }));
    // Another directory at the same colour: asked too.
    let t = ask_on_thread(&b, kreq_in("touch ../x.txt", Verdict::Yellow, &top));
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-3", WireAnswer::Deny, None, "t")
        .unwrap();
    assert!(matches!(t.join().unwrap(), Answer::Deny { .. }));
    // Control: the exec where the hook's ask was judged is that answer.
    assert_eq!(
        b.ask(&kreq_in("touch ../x.txt", Verdict::Yellow, &deep))
            .unwrap(),
        Answer::Once
    );
    let _ = std::fs::remove_dir_all(top.join("tyba-linked-a"));
}

#[test]
fn raising_to_high_needs_the_persons_confirmation_and_lowering_does_not() {
    use tyba_policy::Autonomy;
    let b = broker();
    assert!(matches!(
        b.set_autonomy(Autonomy::High, false, "t"),
        Err(ControlRefused::NotConfirmed {
            from: Autonomy::Medium
        })
    ));
    assert_eq!(b.control().autonomy(), Autonomy::Medium, "unchanged");
    assert_eq!(
        b.set_autonomy(Autonomy::High, true, "t").unwrap(),
        Autonomy::Medium
    );
    // Already high: nothing is raised, nothing to confirm.
    assert_eq!(
        b.set_autonomy(Autonomy::High, false, "t").unwrap(),
        Autonomy::High
    );
    assert_eq!(
        b.set_autonomy(Autonomy::Low, false, "t").unwrap(),
        Autonomy::High
    );
    assert_eq!(b.control().autonomy(), Autonomy::Low);
    b.close("over");
    assert!(matches!(
        b.set_autonomy(Autonomy::Medium, false, "t"),
        Err(ControlRefused::Closed)
    ));
}

#[test]
fn stop_denies_what_is_pending_and_everything_after() {
    let b = broker();
    let t = ask_on_thread(&b, req("touch a", Verdict::Yellow));
    wait_pending(&b, 1);
    assert_eq!(b.stop("tyba stop (pid 1)").unwrap(), 1);
    match t.join().unwrap() {
        Answer::Deny { reason: Some(r) } => {
            assert!(r.contains("stopped by the person"), "{r}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        b.control().stopped_by().as_deref(),
        Some("tyba stop (pid 1)")
    );
    assert!(matches!(b.stop("again"), Err(ControlRefused::Closed)));
    let later = b.ask(&req("touch b", Verdict::Yellow)).unwrap();
    assert!(matches!(later, Answer::Deny { .. }), "{later:?}");
    assert_eq!(
        b.session_view().stopped_by.as_deref(),
        Some("tyba stop (pid 1)")
    );
}

#[test]
fn asks_and_hook_denials_are_counted() {
    let b = broker();
    let t = ask_on_thread(&b, req("touch a", Verdict::Yellow));
    let id = wait_pending(&b, 1)[0].id.clone();
    b.answer(&id, WireAnswer::Once, None, "t").unwrap();
    t.join().unwrap();
    let hb = b.clone();
    let h = std::thread::spawn(move || {
        hb.ask_hook(
            HookAsk {
                agent: "codex".into(),
                tool: "apply_patch".into(),
                action: "apply_patch x".into(),
                verdict: "yellow".into(),
                reasons: Vec::new(),
                rememberable: true,
                cwd: String::new(),
                worktree: String::new(),
                diff: None,
                files: Vec::new(),
            },
            std::process::id(),
        )
    });
    let id = wait_pending(&b, 1)[0].id.clone();
    b.answer(&id, WireAnswer::Deny, None, "t").unwrap();
    assert_eq!(h.join().unwrap().answer, WireAnswer::Deny);
    let v = b.session_view();
    assert_eq!((v.asked, v.denied, v.allowed), (2, 1, 0), "{v:?}");
    b.close("over");
}

#[test]
fn the_prompt_switches_the_level_and_confirms_before_high() {
    use crate::approve::RelayGate;
    use tyba_policy::Autonomy;
    let b = broker();
    let screen = Screen::default();
    let p = prompt::Prompt::start_sized(&b, "w".into(), Box::new(screen.clone()), 24, 80);
    let t = ask_on_thread(&b, req("touch a", Verdict::Yellow));
    screen.wait_for("[s] switch autonomy (now medium)");
    armed(prompt::ARM);
    assert!(p.input(b"s"));
    screen.wait_for("[l] low");
    armed(prompt::QUIET);
    assert!(p.input(b"l"));
    screen.wait_for("autonomy medium -> low");
    assert_eq!(b.control().autonomy(), Autonomy::Low);
    // `shy` typed for the agent (one read, or key by key) raises nothing.
    armed(prompt::QUIET);
    assert!(p.input(b"shy"));
    for k in [b"s", b"h", b"y"] {
        assert!(p.input(k));
    }
    screen.wait_for("keys ignored");
    assert_eq!(b.control().autonomy(), Autonomy::Low);
    // High asks for its name; anything else keeps the level.
    armed(prompt::QUIET);
    assert!(p.input(b"s"));
    armed(prompt::QUIET);
    assert!(p.input(b"h"));
    screen.wait_for("raise autonomy to HIGH?");
    assert!(p.input(b"n\r"));
    screen.wait_for("autonomy stays low");
    assert_eq!(b.control().autonomy(), Autonomy::Low);
    armed(prompt::QUIET);
    assert!(p.input(b"s"));
    armed(prompt::QUIET);
    assert!(p.input(b"h"));
    assert!(p.input(b"high\r"));
    screen.wait_for("autonomy low -> high");
    assert_eq!(b.control().autonomy(), Autonomy::High);
    // The ask on screen stays asked: the change is for the next action.
    assert_eq!(b.pending().len(), 1);
    armed(prompt::QUIET);
    assert!(p.input(b"d"));
    assert!(matches!(t.join().unwrap(), Answer::Deny { .. }));
    b.close("over");
}

/// Waits past `d`: the prompt's keys count again.
fn armed(d: Duration) {
    std::thread::sleep(d + Duration::from_millis(100));
}

#[test]
fn a_hook_diff_is_cleaned_and_bounded_before_anyone_sees_it() {
    let b = broker();
    let mut diff =
        String::from("--- a.txt\n+++ a.txt\n@@ -1 +1 @@\n-old\n+\x1b]2;owned\x07new\u{202e}\n");
    for n in 0..300 {
        diff.push_str(&format!("+line {n}\n"));
    }
    let ask = HookAsk {
        agent: "claude-code".into(),
        tool: "Write".into(),
        action: "write a.txt".into(),
        verdict: "green".into(),
        reasons: Vec::new(),
        rememberable: false,
        cwd: "/wt".into(),
        worktree: "/wt".into(),
        diff: Some(diff),
        files: Vec::new(),
    };
    let hb = b.clone();
    let h = std::thread::spawn(move || hb.ask_hook(ask, std::process::id()));
    let p = wait_pending(&b, 1);
    let shown = p[0].diff.clone().expect("the diff is listed");
    assert!(
        shown.starts_with("--- a.txt\n+++ a.txt\n@@ -1 +1 @@\n-old\n+?]2;owned?new?\n"),
        "{shown}"
    );
    assert!(
        !shown.chars().any(|c| c.is_control() && c != '\n'),
        "{shown}"
    );
    assert_eq!(shown.lines().count(), text::DIFF_MAX_LINES + 1);
    assert!(shown.ends_with("… 105 more lines\n"), "{shown}");
    b.answer(&p[0].id, WireAnswer::Once, None, "t").unwrap();
    assert_eq!(h.join().unwrap().answer, WireAnswer::Once);
    // Kernel asks carry none, and the field is then left out of the listing.
    let t = ask_on_thread(&b, req("touch a", Verdict::Yellow));
    let p = wait_pending(&b, 1);
    assert_eq!(p[0].diff, None);
    let json = serde_json::to_string(&p[0]).unwrap();
    assert!(!json.contains("\"diff\""), "{json}");
    b.answer(&p[0].id, WireAnswer::Once, None, "t").unwrap();
    t.join().unwrap();
    b.close("over");
}

#[test]
fn peers_without_the_diff_field_still_parse() {
    let old_ask = r#"{"op":"ask","agent":"codex","tool":"Bash","action":"ls","verdict":"yellow"}"#;
    match serde_json::from_str::<proto::Request>(old_ask).unwrap() {
        proto::Request::Ask(a) => assert_eq!(a.diff, None),
        other => panic!("{other:?}"),
    }
    let old_view = r#"{"id":"s-1","kind":"hook","action":"x","verdict":"yellow","reasons":[],"always_allowed":false,"pid":1,"argv":[],"cwd":"/","waited_ms":3}"#;
    let v: PendingView = serde_json::from_str(old_view).unwrap();
    assert_eq!(v.diff, None);
    let new_ask = serde_json::to_string(&proto::Request::Ask(HookAsk {
        agent: "codex".into(),
        tool: "apply_patch".into(),
        action: "apply_patch a".into(),
        verdict: "green".into(),
        reasons: Vec::new(),
        rememberable: false,
        cwd: String::new(),
        worktree: String::new(),
        diff: Some("+a\n".into()),
        files: Vec::new(),
    }))
    .unwrap();
    assert!(new_ask.contains(r#""diff":"+a\n""#), "{new_ask}");
}

#[test]
fn a_hook_once_answers_the_agents_wrapped_exec_of_that_command_once_and_nothing_worse() {
    let scratch = tempfile::tempdir().unwrap();
    let sc = std::fs::canonicalize(scratch.path()).unwrap();
    let mut cfg = BrokerConfig::new("0a1b2c3d4e5f", std::env::temp_dir());
    cfg.socket = false;
    cfg.audit = false;
    cfg.notices = false;
    cfg.pause_after = 0;
    cfg.policy = Some(tyba_policy::Policy::embedded_default());
    cfg.scratch = Some(sc.clone());
    let b = Broker::start(cfg).unwrap();
    // Claude Code's wrapper around a command, its cwd file in the session's scratch dir.
    let wrapped = |cmd: &str| {
        format!(
            "\\builtin shopt -u extglob 2>/dev/null || true && {{ \\builtin unalias -- 'which'; \\builtin unset -f -- 'which'; }} >/dev/null 2>&1 || true && eval '{cmd}' \\< /dev/null && pwd -P >| {}/claude-2e7b-cwd",
            sc.display()
        )
    };
    let b2 = b.clone();
    let t = std::thread::spawn(move || {
        b2.ask_hook(shell_hook("touch linked.txt", "yellow"), std::process::id())
    });
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-1", WireAnswer::Once, None, "t")
        .unwrap();
    assert_eq!(t.join().unwrap().answer, WireAnswer::Once);
    // A wrapper around another command, or an ask worse than what the person was shown, is
    // asked (and does not use up the answer).
    let t = ask_on_thread(&b, kreq(&wrapped("touch other.txt"), Verdict::Yellow));
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-2", WireAnswer::Deny, None, "t")
        .unwrap();
    assert!(matches!(t.join().unwrap(), Answer::Deny { .. }));
    let t = ask_on_thread(&b, kreq(&wrapped("touch linked.txt"), Verdict::Red));
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-3", WireAnswer::Deny, None, "t")
        .unwrap();
    assert!(matches!(t.join().unwrap(), Answer::Deny { .. }));
    // The wrapped exec of that command is answered by it, once.
    assert_eq!(
        b.ask(&kreq(&wrapped("touch linked.txt"), Verdict::Yellow))
            .unwrap(),
        Answer::Once
    );
    let t = ask_on_thread(&b, kreq(&wrapped("touch linked.txt"), Verdict::Yellow));
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-4", WireAnswer::Deny, None, "t")
        .unwrap();
    assert!(matches!(t.join().unwrap(), Answer::Deny { .. }));
}

/// An exec ask as the supervisor makes it for a wrapped line: the command inside carried
/// with it (`ExecAsk::inner_command`).
fn wrapped_req(line: &str, inner: &str, verdict: Verdict) -> AskRequest {
    AskRequest {
        exec: Some(crate::approve::ExecAsk {
            argv: vec!["bash".into(), "-c".into(), "-l".into(), line.into()],
            cwd: std::env::temp_dir(),
            env: Vec::new(),
            inner_command: Some(inner.into()),
            reach: Default::default(),
        }),
        ..req(line, verdict)
    }
}

#[test]
fn a_hook_always_answers_the_wrapped_exec_of_that_command_and_nothing_else() {
    let b = linked_broker();
    let b2 = b.clone();
    let t = std::thread::spawn(move || {
        b2.ask_hook(shell_hook("touch linked.txt", "yellow"), std::process::id())
    });
    let p = wait_pending(&b, 1);
    assert!(p[0].always_allowed, "{p:?}");
    b.answer("0a1b2c3d4e5f-1", WireAnswer::Always, None, "t")
        .unwrap();
    assert_eq!(t.join().unwrap().answer, WireAnswer::Always);
    let line = |cmd: &str, n: u32| {
        format!(
            "\\builtin shopt -u extglob 2>/dev/null || true && eval '{cmd}' \\< /dev/null && pwd -P >| /tmp/s/claude-{n}-cwd"
        )
    };
    // Every wrapped exec of that command (a fresh scratch name each call), yellow by the
    // kernel layer's own classification: answered `always`, asking nobody.
    for n in 0..3 {
        assert_eq!(
            b.ask(&wrapped_req(
                &line("touch linked.txt", n),
                "touch linked.txt",
                Verdict::Yellow
            ))
            .unwrap(),
            Answer::Always
        );
    }
    assert!(b.pending().is_empty());
    // Another command inside the same wrapper, or that command red by the kernel layer (not
    // rememberable): asked.
    let t = ask_on_thread(
        &b,
        wrapped_req(
            &line("touch other.txt", 7),
            "touch other.txt",
            Verdict::Yellow,
        ),
    );
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-2", WireAnswer::Deny, None, "t")
        .unwrap();
    assert!(matches!(t.join().unwrap(), Answer::Deny { .. }));
    let t = ask_on_thread(
        &b,
        wrapped_req(
            &line("touch linked.txt", 8),
            "touch linked.txt",
            Verdict::Red,
        ),
    );
    wait_pending(&b, 1);
    b.answer("0a1b2c3d4e5f-3", WireAnswer::Deny, None, "t")
        .unwrap();
    assert!(matches!(t.join().unwrap(), Answer::Deny { .. }));
    // The ask shows the command inside; the whole line stays the action.
    let t = ask_on_thread(
        &b,
        wrapped_req(
            &line("touch third.txt", 9),
            "touch third.txt",
            Verdict::Yellow,
        ),
    );
    let p = wait_pending(&b, 1);
    assert_eq!(p[0].inner_command.as_deref(), Some("touch third.txt"));
    assert!(p[0].action.contains("shopt -u extglob"), "{p:?}");
    b.answer("0a1b2c3d4e5f-4", WireAnswer::Deny, None, "t")
        .unwrap();
    assert!(matches!(t.join().unwrap(), Answer::Deny { .. }));
}

/// A broker with only its hook socket, in a fresh directory.
fn hook_broker() -> (Broker, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hook.sock");
    let mut cfg = BrokerConfig::new("0a1b2c3d4e5f", "/wt".into());
    cfg.socket = false;
    cfg.audit = false;
    cfg.notices = false;
    cfg.pause_after = 0;
    cfg.hook_socket = Some(path.clone());
    (Broker::start(cfg).unwrap(), dir, path)
}

fn hook_line(action: &str) -> String {
    let ask = HookAsk {
        agent: "claude-code".into(),
        tool: "Edit".into(),
        action: action.into(),
        verdict: "yellow".into(),
        reasons: vec![],
        rememberable: false,
        cwd: String::new(),
        worktree: String::new(),
        diff: None,
        files: Vec::new(),
    };
    let mut l = serde_json::to_string(&proto::Request::Ask(ask)).unwrap();
    l.push('\n');
    l
}

#[test]
fn fifty_hook_clients_waiting_at_once_each_get_their_own_answer() {
    use std::io::{BufRead, Write};
    let (b, _dir, path) = hook_broker();
    let clients: Vec<_> = (0..50)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut c = std::os::unix::net::UnixStream::connect(&path).unwrap();
                c.write_all(hook_line(&format!("edit f{i}")).as_bytes())
                    .unwrap();
                let mut line = String::new();
                std::io::BufReader::new(c).read_line(&mut line).unwrap();
                serde_json::from_str::<proto::Reply>(&line).unwrap()
            })
        })
        .collect();
    let p = wait_pending(&b, 50);
    for v in &p {
        let i: usize = v.action.split(' ').nth(1).unwrap()[1..].parse().unwrap();
        let a = if i % 2 == 0 {
            WireAnswer::Once
        } else {
            WireAnswer::Deny
        };
        b.answer(&v.id, a, Some(format!("no {i}")), "test").unwrap();
    }
    for (i, c) in clients.into_iter().enumerate() {
        let r = c.join().unwrap();
        let a = r.answer.unwrap();
        if i % 2 == 0 {
            assert_eq!(a.answer, WireAnswer::Once, "{i}");
        } else {
            assert_eq!(a.answer, WireAnswer::Deny, "{i}");
            assert_eq!(a.reason.as_deref(), Some(format!("no {i}").as_str()));
        }
    }
    assert!(b.pending().is_empty());
    b.close("test end");
}

#[test]
fn a_hook_client_that_hangs_up_mid_ask_has_its_ask_denied_at_once() {
    use std::io::Write;
    let (b, _dir, path) = hook_broker();
    let mut c = std::os::unix::net::UnixStream::connect(&path).unwrap();
    c.write_all(hook_line("edit gone").as_bytes()).unwrap();
    wait_pending(&b, 1);
    drop(c);
    // This process lives on: only the dead channel can have denied it.
    wait_pending(&b, 0);
    b.close("test end");
}

#[test]
fn garbage_and_oversized_lines_get_an_error_and_nothing_is_queued() {
    use std::io::{BufRead, Read, Write};
    let (b, _dir, path) = hook_broker();
    let mut c = std::os::unix::net::UnixStream::connect(&path).unwrap();
    c.write_all(b"\x00\xffnot json\n{\"op\":\"ask\"}\n")
        .unwrap();
    let mut r = std::io::BufReader::new(c.try_clone().unwrap());
    for _ in 0..2 {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let reply: proto::Reply = serde_json::from_str(&line).unwrap();
        assert!(!reply.ok && reply.error.unwrap().starts_with("bad request"));
    }
    // A line over the limit: an error, then the connection is closed.
    let big = vec![b'x'; proto::MAX_LINE_BYTES + 2];
    let _ = c.write_all(&big);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("request too long"), "{line}");
    let mut rest = Vec::new();
    assert_eq!(r.read_to_end(&mut rest).unwrap_or(0), 0);
    assert!(b.pending().is_empty());
    b.close("test end");
}

/// A hook's record (a decision it made without asking) is taken on the hook socket only: a
/// refusal is counted as denied, an allow is not; the same request on the person's socket
/// side of `dispatch` is refused.
#[test]
fn hook_records_are_taken_on_the_hook_socket_and_counted() {
    use std::io::{BufRead, Write};
    let (b, _dir, path) = hook_broker();
    let record = |decision: proto::HookDecision| {
        let r = proto::Request::Record(proto::HookRecord {
            agent: "claude-code".into(),
            tool: "Bash".into(),
            action: "git push origin HEAD:main".into(),
            verdict: "blocked".into(),
            reasons: vec!["push could update protected refs/heads/main".into()],
            decision,
            reason: Some("refused by tyba: push could update protected refs/heads/main".into()),
            cwd: "/wt".into(),
        });
        let mut c = std::os::unix::net::UnixStream::connect(&path).unwrap();
        let mut l = serde_json::to_string(&r).unwrap();
        l.push('\n');
        c.write_all(l.as_bytes()).unwrap();
        let mut line = String::new();
        std::io::BufReader::new(c).read_line(&mut line).unwrap();
        serde_json::from_str::<proto::Reply>(&line).unwrap()
    };
    let before = b.session_view().denied;
    assert!(record(proto::HookDecision::Refuse).ok);
    assert_eq!(b.session_view().denied, before + 1);
    assert!(record(proto::HookDecision::Allow).ok);
    assert_eq!(b.session_view().denied, before + 1);
    assert!(b.pending().is_empty());
    let r = server::tests_dispatch_person(
        &b,
        proto::Request::Record(proto::HookRecord {
            agent: "claude-code".into(),
            tool: String::new(),
            action: "x".into(),
            verdict: String::new(),
            reasons: vec![],
            decision: proto::HookDecision::Allow,
            reason: None,
            cwd: String::new(),
        }),
    );
    assert!(!r.ok, "{r:?}");
    b.close("test end");
}

/// The outside-files server's ask of `access` to `path` by the agent program.
fn file_req(path: &std::path::Path, access: &'static str) -> AskRequest {
    AskRequest {
        kind: AskKind::File {
            path: path.display().to_string(),
            access,
            scope: "reading this file",
            holder: "the agent itself".into(),
            real: vec![path.to_path_buf()],
        },
        ..req("unused", Verdict::Red)
    }
}

/// The kernel layer's ask of the agent itself renaming `from` to `to`.
fn rename_req(from: &std::path::Path, to: &std::path::Path) -> AskRequest {
    AskRequest {
        kind: AskKind::File {
            path: format!("{} to {}", from.display(), to.display()),
            access: "rename",
            scope: "this rename",
            holder: "the agent itself".into(),
            real: vec![from.to_path_buf(), to.to_path_buf()],
        },
        ..req("unused", Verdict::Red)
    }
}

/// A file tool's hook ask naming `files` with `action`.
fn file_hook(action: &str, files: &[&str]) -> HookAsk {
    HookAsk {
        tool: "Read".into(),
        action: action.into(),
        verdict: "red".into(),
        rememberable: false,
        files: files.iter().map(|f| f.to_string()).collect(),
        ..shell_hook("unused", "red")
    }
}

#[test]
fn a_hook_approval_of_a_file_reaches_that_file_for_the_agent_program_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let notes = root.join("notes.md");
    std::fs::write(&notes, "n").unwrap();
    let other = root.join("other.md");
    let b = linked_broker();
    // Nothing answered yet: no answer without an ask.
    assert_eq!(b.answered(&file_req(&notes, "read")), None);
    let b2 = b.clone();
    let mut read = file_hook(&format!("read {}", notes.display()), &[]);
    read.files = vec![notes.display().to_string()];
    let t = std::thread::spawn(move || b2.ask_hook(read, std::process::id()));
    let p = wait_pending(&b, 1);
    // The person is shown what an approval lets through, resolved.
    assert!(
        p[0].reasons.iter().any(|r| r.contains(&format!(
            "the agent program itself read {}",
            notes.display()
        ))),
        "{:?}",
        p[0].reasons
    );
    b.answer(&p[0].id, WireAnswer::Once, None, "t").unwrap();
    assert_eq!(t.join().unwrap().answer, WireAnswer::Once);
    // The agent program's read of that file is the answer, more than once (one intent).
    assert_eq!(b.answered(&file_req(&notes, "read")), Some(Answer::Once));
    assert_eq!(b.answered(&file_req(&notes, "read")), Some(Answer::Once));
    // Not writing it, not another file, not a listing.
    assert_eq!(b.answered(&file_req(&notes, "write")), None);
    assert_eq!(b.answered(&file_req(&other, "read")), None);
    assert_eq!(b.answered(&file_req(&notes, "list")), None);
    // A command's ask of the same file is asked, not linked.
    let b3 = b.clone();
    let r = file_req(&notes, "read");
    let t = std::thread::spawn(move || b3.ask(&r).unwrap());
    let p = wait_pending(&b, 1);
    b.answer(&p[0].id, WireAnswer::Deny, None, "t").unwrap();
    assert!(matches!(t.join().unwrap(), Answer::Deny { .. }));
    b.close("over");
}

#[test]
fn a_hook_ask_whose_files_are_not_its_action_links_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let shown = root.join("notes.md");
    let secret = root.join("secret.txt");
    let b = linked_broker();
    // The action shows one file, the files field names another: no link, nothing shown.
    let forged = file_hook(
        &format!("read {}", shown.display()),
        &[secret.to_str().unwrap()],
    );
    // A shell tool's files are never linked either.
    let mut shell = shell_hook(&format!("cat {}", secret.display()), "red");
    shell.files = vec![secret.display().to_string()];
    for ask in [forged, shell] {
        let b2 = b.clone();
        let t = std::thread::spawn(move || b2.ask_hook(ask, std::process::id()));
        let p = wait_pending(&b, 1);
        assert!(
            !p[0].reasons.iter().any(|r| r.contains("an approval lets")),
            "{:?}",
            p[0].reasons
        );
        b.answer(&p[0].id, WireAnswer::Once, None, "t").unwrap();
        t.join().unwrap();
    }
    assert_eq!(b.answered(&file_req(&secret, "read")), None);
    assert_eq!(b.answered(&file_req(&shown, "read")), None);
    // The control: a write tool's ask naming the file links reading and writing it.
    let b2 = b.clone();
    let w = file_hook(
        &format!("write {}", secret.display()),
        &[secret.to_str().unwrap()],
    );
    let t = std::thread::spawn(move || b2.ask_hook(w, std::process::id()));
    let p = wait_pending(&b, 1);
    b.answer(&p[0].id, WireAnswer::Once, None, "t").unwrap();
    t.join().unwrap();
    for access in ["read", "write", "create"] {
        assert_eq!(
            b.answered(&file_req(&secret, access)),
            Some(Answer::Once),
            "{access}"
        );
    }
    // Its atomic save: a new sibling `secret.txt.tmp…`, renamed over it; not another name,
    // another directory, or a rename elsewhere.
    let save = root.join("secret.txt.tmp.42.beef");
    assert_eq!(b.answered(&file_req(&save, "create")), Some(Answer::Once));
    // Made new, not an existing file of that name opened for writing.
    assert_eq!(b.answered(&file_req(&save, "write")), None);
    assert_eq!(b.answered(&rename_req(&save, &secret)), Some(Answer::Once));
    let sub = root.join("sub/secret.txt.tmp.1");
    for (from, to) in [
        (save.as_path(), shown.as_path()),
        (secret.as_path(), save.as_path()),
        (sub.as_path(), secret.as_path()),
    ] {
        assert_eq!(
            b.answered(&rename_req(from, to)),
            None,
            "{from:?} -> {to:?}"
        );
    }
    for other in [
        root.join("secret.txt.bak"),
        root.join("xsecret.txt.tmp"),
        sub,
    ] {
        assert_eq!(b.answered(&file_req(&other, "create")), None, "{other:?}");
    }
    // A read link covers no save.
    assert_eq!(
        b.answered(&file_req(&root.join("notes.md.tmp.1"), "create")),
        None
    );
    b.close("over");
}

/// A hook's answer is for the file its name held: when the outside-files server removes,
/// links over or renames that name, the answer ends (review 9's r9-03 class), except the
/// answered file's own atomic save (its `FILE.tmp…` sibling renamed over it), which is the
/// write that was approved.
#[test]
fn a_hook_answer_for_a_file_ends_when_its_name_changes_but_its_own_save() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let notes = root.join("notes.md");
    let b = linked_broker();
    let approve = |action: &str| {
        let b2 = b.clone();
        let mut ask = file_hook(&format!("{action} {}", notes.display()), &[]);
        ask.files = vec![notes.display().to_string()];
        let t = std::thread::spawn(move || b2.ask_hook(ask, std::process::id()));
        let p = wait_pending(&b, 1);
        b.answer(&p[0].id, WireAnswer::Once, None, "t").unwrap();
        t.join().unwrap();
    };
    approve("write");
    assert_eq!(b.answered(&file_req(&notes, "read")), Some(Answer::Once));
    // A save-named sibling the program did not make (a second name of another file, linked
    // there by a command): its rename over the file is no save, and ends the answer (review
    // 10's r10-03).
    let planted = root.join("notes.md.tmp.9.cd");
    assert_eq!(b.answered(&rename_req(&planted, &notes)), None);
    // Its own atomic save, the sibling made new under the answer, keeps it.
    let save = root.join("notes.md.tmp.7.ab");
    assert_eq!(b.answered(&file_req(&save, "create")), Some(Answer::Once));
    assert_eq!(b.answered(&rename_req(&save, &notes)), Some(Answer::Once));
    b.names_changed(&[&save, &notes], Some((&save, &notes)));
    assert_eq!(b.answered(&file_req(&notes, "write")), Some(Answer::Once));
    // A sibling it made whose name then changed (removed, a secret linked there) is no save.
    let again = root.join("notes.md.tmp.8.ef");
    assert_eq!(b.answered(&file_req(&again, "create")), Some(Answer::Once));
    b.names_changed(&[&again], None);
    assert_eq!(b.answered(&rename_req(&again, &notes)), None);
    b.names_changed(&[&planted, &notes], Some((&planted, &notes)));
    assert_eq!(b.answered(&file_req(&notes, "read")), None);
    approve("write");
    // Another file renamed over it, a removal, a link made there: it ends.
    let other = root.join("secret.txt");
    b.names_changed(&[&other, &notes], Some((&other, &notes)));
    assert_eq!(b.answered(&file_req(&notes, "read")), None);
    approve("read");
    b.names_changed(&[&notes], None);
    assert_eq!(b.answered(&file_req(&notes, "read")), None);
    approve("read");
    // A change of another name, or of a name beside it, leaves it.
    b.names_changed(&[&root.join("notes.md2"), &other], None);
    assert_eq!(b.answered(&file_req(&notes, "read")), Some(Answer::Once));
    // A change of the directory holding it ends it.
    b.names_changed(&[&root], None);
    assert_eq!(b.answered(&file_req(&notes, "read")), None);
    b.close("over");
}

/// Once `close` returns, the session's sockets take no connection, by whatever name they
/// are reached (a hard link made while they listened stands for a name the agent kept): the
/// session's lock can be released next without a listening socket left behind it.
#[test]
fn a_closed_brokers_socket_refuses_connections_by_any_name() {
    let (b, dir, path) = hook_broker();
    let other = dir.path().join("kept.sock");
    std::fs::hard_link(&path, &other).unwrap();
    // Control: while listening, the other name connects.
    assert!(std::os::unix::net::UnixStream::connect(&other).is_ok());
    b.close("test end");
    assert!(!path.exists(), "the socket's name is removed");
    let e = std::os::unix::net::UnixStream::connect(&other).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{e}");
}
