"""The README's compose commands are those of the tool the Makefile installs: Debian's
docker-compose 1.29 is the `docker-compose` command, not Docker's `docker compose` plugin."""

from __future__ import annotations

import re

from tests.readme import ROOT, code_blocks


def test_the_readme_runs_compose_with_the_command_make_installs() -> None:
    packages = re.search(r"^APT_PACKAGES := (.*)$", (ROOT / "Makefile").read_text(), flags=re.M)
    assert packages is not None and "docker-compose" in packages.group(1).split()
    commands = [line for block in code_blocks("sh") for line in block.splitlines() if "compose" in line]
    assert commands, "the README shows no compose command"
    assert not [line for line in commands if re.search(r"\bdocker compose\b", line)]
    assert all("docker-compose " in line for line in commands if line.split()[0:1] != ["#"]), commands


def test_secrets_stay_out_of_git() -> None:
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "secrets/" in ignored  # make-certs.sh writes the authority's private key there
