//! Test harness for the ask path: runs one session like `tyba run --here` in the current
//! directory with the embedded default policy, but with a chosen approver instead of the
//! deny-all one. Used by `supervisor/tests/approver.rs` only; not installed as part of tyba.
//!
//! `tyba-approver-harness once|deny:REASON -- AGENT [ARGS…]`

use std::sync::Arc;
use tyba_supervisor::session::{self, WorktreeChoice};
use tyba_supervisor::{
    AllowOnce, Answer, Approver, ApproverError, AskRequest, Enforcement, SandboxPlan, SessionConfig,
};

#[derive(Debug)]
struct DenyWith(String);

impl Approver for DenyWith {
    fn ask(&self, _r: &AskRequest) -> Result<Answer, ApproverError> {
        Ok(Answer::Deny {
            reason: Some(self.0.clone()),
        })
    }
}

fn main() -> std::process::ExitCode {
    // A refused exec runs this executable as tyba's refusal program (the proxy told to
    // refuse), as it would run tyba's own.
    tyba_supervisor::proxy::run_if_proxy();
    match real_main() {
        Ok(c) => std::process::ExitCode::from(c),
        Err(e) => {
            eprintln!("harness: {e}");
            std::process::ExitCode::from(4)
        }
    }
}

fn real_main() -> Result<u8, Box<dyn std::error::Error>> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mode = args
        .first()
        .ok_or("usage: once|deny:REASON -- AGENT…")?
        .to_string_lossy()
        .into_owned();
    let agent: Vec<std::ffi::OsString> = args
        .iter()
        .skip_while(|a| *a != "--")
        .skip(1)
        .cloned()
        .collect();
    let program = agent.first().ok_or("no agent")?.clone();
    let approver: Arc<dyn Approver> = match mode.strip_prefix("deny:") {
        Some(reason) => Arc::new(DenyWith(reason.to_string())),
        None if mode == "once" => Arc::new(AllowOnce),
        None => return Err("mode must be once or deny:REASON".into()),
    };
    let cwd = std::env::current_dir()?;
    let session = session::prepare(&cwd, &WorktreeChoice::Existing(cwd.clone()))?;
    let policy = tyba_policy::Policy::embedded_default();
    let tmp = std::env::temp_dir().join(format!("tyba-harness-{}", session.id));
    std::fs::create_dir_all(&tmp)?;
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let mut plan = SandboxPlan::build(tyba_supervisor::sandbox::PlanInputs {
        session: &session,
        tmp_dir: &tmp,
        config: policy.config(),
        home: home.as_deref(),
        agent_program: None,
        agent_path_env: None,
    });
    let _stand_ins = tyba_supervisor::sandbox::git_stand_ins(&mut plan);
    let cfg = SessionConfig {
        session,
        plan,
        enforcement: Enforcement::probe(),
        allow_weaker: false,
        program: program.clone().into(),
        argv: agent,
        env: std::env::vars_os().collect(),
        policy,
        control: tyba_supervisor::control::SessionControl::new(
            tyba_policy::Autonomy::Medium,
            tyba_supervisor::control::SessionInfo::new(Vec::new(), "auto"),
        ),
        exec_mode: tyba_policy::ExecMode::Auto,
        agent_hosts: Vec::new(),
        home,
        use_pty: false,
        here_watch: None,
        after_go: None,
    };
    let out = tyba_supervisor::run(cfg, approver)?;
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(u8::try_from(out.exit_status).unwrap_or(1))
}
