"""The one ``#SBATCH`` block scanner (chain.backends.directives) and the two
backends that read a script's directives through it (local, pyslurm)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from chain.backends.directives import DirectiveError, sbatch_lines
from chain.backends.local.sbatch import parse_directives
from chain.backends.slurm.pyslurm_options import sbatch_directives
from chain.errors import SchedulerError

SCRIPT = textwrap.dedent("""\
    #!/bin/bash -l
    # a comment

    #SBATCH --time 1:00   # a trailing comment
    #SBATCHX --ignored
    #SBATCH\t-J 'my job'
        #SBATCH --mem=4G
    #SBATCH
    echo start
    #SBATCH --time=5
""")


def test_the_leading_block_as_sbatch_reads_it() -> None:
    assert list(sbatch_lines(SCRIPT)) == [
        ("#SBATCH --time 1:00   # a trailing comment", ["--time", "1:00"]),
        ("#SBATCH\t-J 'my job'", ["-J", "my job"]),
        ("#SBATCH --mem=4G", ["--mem=4G"]),
    ]


def test_a_shebang_only_on_the_first_line_and_nothing_after_a_command() -> None:
    assert list(sbatch_lines("#SBATCH -t 5\n#!/bin/sh\n#SBATCH -J a\n")) == [
        ("#SBATCH -t 5", ["-t", "5"]),
        ("#SBATCH -J a", ["-J", "a"]),
    ]
    assert list(sbatch_lines("true\n#SBATCH -t 5\n")) == []
    assert list(sbatch_lines("")) == []


def test_a_line_that_does_not_split_names_the_line() -> None:
    lines = sbatch_lines("#!/bin/bash\n#SBATCH -t 5\n#SBATCH -J 'open\n")
    assert next(lines) == ("#SBATCH -t 5", ["-t", "5"])
    with pytest.raises(DirectiveError) as caught:
        next(lines)
    assert caught.value.line == "#SBATCH -J 'open"
    assert isinstance(caught.value.reason, ValueError) and caught.value.__cause__ is caught.value.reason


def test_each_backend_keeps_its_own_message() -> None:
    bad = "#!/bin/bash\n#SBATCH -J 'open\n"
    with pytest.raises(SchedulerError, match=r"^cannot parse directive \"#SBATCH -J 'open\": No closing quotation$"):
        parse_directives(bad)
    with pytest.raises(
        SchedulerError,
        match=r"^cannot read the #SBATCH line \"#SBATCH -J 'open\" of job.sh: "
        r"No closing quotation$",
    ):
        sbatch_directives(bad, Path("job.sh"))


def test_each_backend_keeps_its_own_option_mapping() -> None:
    local = parse_directives(SCRIPT)
    assert (local.time, local.job_name) == ("1:00", "my job")
    assert sbatch_directives(SCRIPT, Path("job.sh")) == {"time": 1, "job-name": "my job", "mem": "4G"}
