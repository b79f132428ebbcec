#!/usr/bin/env bash
# A scripted agent session under `tyba run` on a real repository (issue 4 §8): it reads, builds,
# writes, deletes, tries to leave the worktree, tries the network and tries to push to main.
# Runs non-interactively, so every ask is denied with its reason.
# Usage: scripts/demo.sh            (builds tyba if needed; needs git, bash, perl)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TYBA=${TYBA:-}
if [ -z "$TYBA" ]; then
    if [ -x "$ROOT/target/release/tyba" ]; then
        TYBA=$ROOT/target/release/tyba
    else
        (cd "$ROOT" && cargo build --quiet --bin tyba)
        TYBA=$ROOT/target/debug/tyba
    fi
fi

DEMO=$(mktemp -d /tmp/tyba-demo.XXXXXX)
trap 'rm -rf "$DEMO"' EXIT
export HOME="$DEMO/home" XDG_STATE_HOME="$DEMO/home/.local/state" XDG_CONFIG_HOME="$DEMO/home/.config"
export GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME/.ssh"
echo "-----BEGIN OPENSSH PRIVATE KEY----- (demo)" > "$HOME/.ssh/id_ed25519"
git config --global user.name "Demo Person"
git config --global user.email demo@example.com
git config --global init.defaultBranch main

# The person's repository, with a remote to push to.
git init -q --bare "$DEMO/origin.git"
REPO=$DEMO/project
mkdir -p "$REPO/src"
cd "$REPO"
git init -q
printf '# project\n\nA tiny project for the tyba demo.\n' > README.md
printf 'hello\n' > src/a.txt
printf 'world\n' > src/b.txt
printf '#!/bin/sh\nmkdir -p dist && cat src/*.txt > dist/all.txt && echo built dist/all.txt\n' > build.sh
chmod +x build.sh
git add -A && git commit -q -m "initial commit"
git remote add origin "$DEMO/origin.git"
git push -q origin main

# The "agent": runs each tool call as `bash -c COMMAND`, like coding agents do.
cat > "$DEMO/agent.sh" <<'AGENT'
step() {
    printf '\n\033[1magent $ %s\033[0m\n' "$1"
    bash -c "$1"
    printf '[exit %s]\n' "$?"
}
step 'ls'
step 'cat README.md'
step 'git log --oneline'
step './build.sh'
step 'cat dist/all.txt'
step 'echo "notes from the agent" > notes.txt && cat notes.txt'
step 'rm notes.txt'
step 'rm -rf dist'
step 'cat ~/.ssh/id_ed25519'
step 'echo pwned > ../outside.txt'
step "perl -e 'open(my \$f, \">>\", \"\$ENV{HOME}/.bashrc\") or die \"the kernel said: \$!\\n\"'"
step 'curl -s https://example.com'
step 'git add -A && git commit -q -m "agent: build output" && git log --oneline -1'
step 'git push origin HEAD:main'
step 'git push origin HEAD:agent-work'
AGENT

echo 'person $ tyba run --non-interactive --autonomy high -- bash -c "$(cat agent.sh)"'
set +e
"$TYBA" run --non-interactive --autonomy high -- bash -c "$(cat "$DEMO/agent.sh")"
status=$?
set -e
echo
echo "[tyba exit $status]"
echo
echo "person $ git log --oneline --all   # in the person's repository, outside the sandbox"
git -C "$REPO" log --oneline --all
echo
echo "person $ git -C origin.git log --oneline main   # the remote's main is untouched"
git -C "$DEMO/origin.git" log --oneline main
