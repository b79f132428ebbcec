#!/bin/bash
# Adds to the fixture of policy_fixture.sh (in DIR) the names that are no UTF-8 text the
# cases of commands-bytes.jsonl name, in DIR/W/build/.bytes (untracked, made after the fixture's
# commits; hidden, so that the globs of the other corpora do not reach it):
#   build/.bytes/cfg\xff     a link to the worktree's credential ../../.env
#   build/.bytes/x\xfe       a link to ../../../O, out of the worktree (O holds secret.txt)
#   build/.bytes/lnk         a link whose target, x\xfe, is no UTF-8 text
#   build/.bytes/d\xfd/k     a link, in a directory whose name is no UTF-8 text, to ../../../.env
#   build/.bytes/notes.txt   a plain file
# usage: bytes_fixture.sh DIR
set -euo pipefail
odd=$1/W/build/.bytes
mkdir -p "$odd"
cd "$odd"
echo notes >notes.txt
ln -s ../../.env $'cfg\xff'
ln -s ../../../O $'x\xfe'
ln -s $'x\xfe' lnk
mkdir $'d\xfd'
ln -s ../../../.env $'d\xfd/k'
