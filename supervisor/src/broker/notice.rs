//! Desktop notifications: `notify-send` (freedesktop notifications over D-Bus) when it is
//! installed and a graphical or D-Bus session is there. The terminal bell and title are
//! drawn by [`super::prompt`] when `tyba run` relays a terminal.

use super::proto::PendingView;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn has_desktop() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
}

/// Tells the desktop an ask is waiting (best effort, never blocks the ask).
pub fn announce(session: &str, p: &PendingView) {
    if !has_desktop() {
        return;
    }
    let Some(bin) = find_on_path("notify-send") else {
        return;
    };
    let title = format!("tyba: {} ask waiting ({})", p.verdict, p.id);
    // The command behind the agent's wrapper, or the action cut to a bound.
    let action = match &p.inner_command {
        Some(i) => format!("run `{}`", super::text::shown_action(&p.action, Some(i))),
        None => super::text::shown_action(&p.action, None),
    };
    let body = format!(
        "{action}\nAnswer in the terminal, or: tyba approve {} / tyba deny {}",
        p.id, p.id
    );
    let child = Command::new(bin)
        .args(["--app-name=tyba", "--category=im", &title, &body])
        .env("TYBA_SESSION", session)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    if let Ok(mut c) = child {
        // Reap it without making the ask wait.
        let _ = std::thread::Builder::new()
            .name("tyba-notify-send".into())
            .spawn(move || c.wait());
    }
}
