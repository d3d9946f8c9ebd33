#!/bin/bash
# lint.sh - ctest ansible.lint: `ansible-playbook --syntax-check` on every
# playbook of ansible/ (against inventory.example.ini) and ansible-lint's
# production profile on every YAML file there. Debian's ansible and
# ansible-lint (make deps); a missing one is a failure naming the package.
set -euo pipefail
A=$(cd "$(dirname "$0")/../../ansible" && pwd)
command -v ansible-playbook >/dev/null || { echo "ansible-playbook missing: apt-get install ansible (make deps)"; exit 1; }
command -v ansible-lint >/dev/null || { echo "ansible-lint missing: apt-get install ansible-lint (make deps)"; exit 1; }
cd "$A"
mapfile -t playbooks < <(grep -l '^- name: .*' ./*.yml | sort)
[ "${#playbooks[@]}" -ge 2 ] || { echo "expected site.yml and figure.yml in $A, found: ${playbooks[*]}"; exit 1; }
for p in "${playbooks[@]}"; do
  ANSIBLE_NOCOLOR=1 ansible-playbook --syntax-check -i inventory.example.ini "$p"
done
mapfile -t files < <(find . -name '*.yml' | sort)
ANSIBLE_NOCOLOR=1 ansible-lint --nocolor --profile production "${files[@]}"
echo "syntax-check: ${playbooks[*]}; ansible-lint (production): ${#files[@]} files"
