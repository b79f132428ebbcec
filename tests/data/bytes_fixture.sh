#!/bin/bash
# Adds to the fixture of policy_fixture.sh (in DIR) the names that are no UTF-8 text the
# cases of commands-bytes.jsonl name, in DIR/W/odd (untracked, made after the fixture's
# commits):
#   odd/cfg\xff     a link to the worktree's credential ../.env
#   odd/x\xfe       a link to ../../O, out of the worktree (O holds secret.txt)
#   odd/lnk         a link whose target, x\xfe, is no UTF-8 text
#   odd/d\xfd/k     a link, in a directory whose name is no UTF-8 text, to ../../.env
#   odd/notes.txt   a plain file
# usage: bytes_fixture.sh DIR
set -euo pipefail
odd=$1/W/odd
mkdir -p "$odd"
cd "$odd"
echo notes >notes.txt
ln -s ../.env $'cfg\xff'
ln -s ../../O $'x\xfe'
ln -s $'x\xfe' lnk
mkdir $'d\xfd'
ln -s ../../.env $'d\xfd/k'
