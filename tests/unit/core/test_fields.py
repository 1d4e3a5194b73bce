"""The settings table (``chain.core.fields.FIELDS``): one row a setting,
its environment variable, TOML key, option and help, and its default the
``Settings`` default."""

from __future__ import annotations

from chain.core.fields import FIELD_BY_NAME, FIELDS
from chain.core.resolution import from_json, resolve
from chain.core.settings import Settings

APP = {"app_cmd": "python3 app.py"}


def test_every_field_has_an_env_name_and_roundtrips() -> None:
    names = [f.env for f in FIELDS]
    assert len(names) == len(set(names))
    s = resolve({**APP, "hooks": ["x"], "launch_mode": "srun"}, {}, {})
    assert from_json(s.to_json()) == s
    assert {f.name for f in FIELDS} == set(Settings.__dataclass_fields__)


# --- help texts ----------------------------------------------------------------
def test_checkpoint_every_is_said_to_be_passed_to_the_app() -> None:
    """chain never checkpoints the app: it passes N on as CHECKPOINT_EVERY."""
    helps = {spec.name: spec.help for spec in FIELDS}
    assert "passed to the app as CHECKPOINT_EVERY" in helps["checkpoint_every"]
    assert not helps["checkpoint_every"].startswith("app checkpoints")
    assert "passed to the app as MAX_ITER" in helps["max_iter"]
    assert "passed to the app as CKPT_PATH" in helps["ckpt_path"]
    # a runner failure beyond the retries makes the chain fail (ChainState.FAILED), not stop
    assert helps["retries"].endswith("before the chain fails")
    assert "K, M (the default), G or T" in helps["runner_mem"]


def test_an_option_is_the_name_with_dashes_unless_the_row_names_its_flag() -> None:
    assert FIELD_BY_NAME["max_iter"].option == "--max-iter"
    assert FIELD_BY_NAME["hooks"].option == "--hook"  # repeatable: one hook a flag
    assert len({spec.option for spec in FIELDS}) == len(FIELDS)


def test_a_rows_default_is_the_settings_default() -> None:
    defaults = Settings()
    assert all(spec.default == getattr(defaults, spec.name) for spec in FIELDS)
    assert FIELD_BY_NAME["max_iter"].default == 500 and FIELD_BY_NAME["hooks"].default == ()
