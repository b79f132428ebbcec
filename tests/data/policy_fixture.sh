#!/bin/bash
# Builds the fixture every case of commands.jsonl assumes (see corpus-README.md), in DIR:
#   DIR/W    the worktree: a git repository (main, master, tag v1.0, feature/x checked out,
#            remotes origin and upstream), with the files and symlinks the cases name
#            (share/lib/out is a link out of the worktree two levels down: what a copy or
#            move of share carries, what a globstar `**` reaches)
#   DIR/O    a directory beside W, outside it, holding secret.txt (W/outdir points here)
#   DIR/home an empty HOME
# usage: policy_fixture.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
dir=$(cd "$dir" && pwd -P)
for v in $(compgen -e); do
    case $v in GIT_*) unset "$v" ;; esac
done
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME=$dir/home
export GIT_AUTHOR_NAME=Fixture GIT_AUTHOR_EMAIL=fixture@example.invalid
export GIT_COMMITTER_NAME=Fixture GIT_COMMITTER_EMAIL=fixture@example.invalid
mkdir -p "$dir/home" "$dir/O"
echo secret >"$dir/O/secret.txt"
git init -q --bare -b main "$dir/origin.git"
git init -q --bare -b main "$dir/upstream.git"
W=$dir/W
git init -q -b main "$W"
cd "$W"
mkdir -p src docs build config
echo '# fixture' >README.md
echo 'foo notes' >notes.txt
printf 'all:\n\ttrue\n' >Makefile
printf '#!/bin/sh\necho install\n' >install.sh
echo 'fn main() {}' >src/main.rs
echo 'pub fn f() {}' >src/lib.rs
echo '# guide' >docs/guide.md
echo obj >build/out.o
echo 'TOKEN=x' >.env
echo '{}' >config/credentials.json
ln -s src inside
ln -s ../O outdir
mkdir -p share/lib
ln -s ../../../O share/lib/out
git add -A
git commit -q -m c1
git tag v1.0
git branch master
git remote add origin "$dir/origin.git"
git remote add upstream "$dir/upstream.git"
git push -q origin main master
git push -q upstream main
git fetch -q origin
git branch -q -u origin/main main
echo more >>notes.txt
git commit -q -am c2
git checkout -q -b feature/x main
