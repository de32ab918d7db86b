"""prorl_swe: SWE-bench-format instances. /seed_session puts the repository at /testbed (offline
instances built from PyPI sdists by `prorl swe build`, or per-instance Apptainer images on
clusters); tools bash and editor; /verify takes the session's git diff, applies it in a fresh
sandbox and grades FAIL_TO_PASS / PASS_TO_PASS with the swebench package. Logic:
`nemo_gym_prorl.tasks.swe`."""

from pathlib import Path

from nemo_gym.verifier_fixture import VerifierFixture
from pydantic import Field

from nemo_gym_prorl.tasks.gym_server import ProRLServerConfig, ProRLTaskServer, ProRLVerifyRequest
from nemo_gym_prorl.tasks.swe import SweConfig, SweTask


class ProRLSweConfig(ProRLServerConfig):
    swe: SweConfig = Field(default_factory=SweConfig)
    bash_timeout_s: float = 300.0


class ProRLSweServer(ProRLTaskServer):
    config: ProRLSweConfig
    task_tools = ("bash", "editor")

    def make_task(self) -> SweTask:
        return SweTask(self.config.swe)


def _fixture_server() -> ProRLSweServer:
    from unittest.mock import MagicMock

    from nemo_gym.server_utils import ServerClient

    config = ProRLSweConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="prorl_swe", domain="coding")
    return ProRLSweServer(config=config, server_client=MagicMock(spec=ServerClient))


VERIFIER_FIXTURE = VerifierFixture(
    server_factory=_fixture_server,
    request_model=ProRLVerifyRequest,
    cases_path=Path(__file__).parent / "tests" / "verifier_cases.jsonl",
    invoke=lambda server, request: server.verify_body(request),
)


if __name__ == "__main__":
    ProRLSweServer.run_webserver()
