"""hydra_plugins/hydra_chain_launcher's tests, one module per module (``_mapping`` -> test_mapping).

Not under tests/unit/hydra_plugins: tests/unit is on ``sys.path`` (its
conftest), where a ``hydra_plugins`` package of tests would hide the
namespace package that Hydra and these tests import the launcher from.
"""
