"""prorl_stem: multiple-choice and numeric (with units) science questions, optional Python tool.
Logic: `nemo_gym_prorl.tasks.stem`."""

from pathlib import Path

from nemo_gym.verifier_fixture import VerifierFixture

from nemo_gym_prorl.tasks.gym_server import ProRLServerConfig, ProRLTaskServer, ProRLVerifyRequest
from nemo_gym_prorl.tasks.stem import StemTask


class ProRLStemConfig(ProRLServerConfig):
    pass


class ProRLStemServer(ProRLTaskServer):
    config: ProRLStemConfig
    task_tools = ("ipython", "submit")

    def make_task(self) -> StemTask:
        return StemTask()


def _fixture_server() -> ProRLStemServer:
    from unittest.mock import MagicMock

    from nemo_gym.server_utils import ServerClient

    config = ProRLStemConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="prorl_stem", domain="knowledge")
    return ProRLStemServer(config=config, server_client=MagicMock(spec=ServerClient))


VERIFIER_FIXTURE = VerifierFixture(
    server_factory=_fixture_server,
    request_model=ProRLVerifyRequest,
    cases_path=Path(__file__).parent / "tests" / "verifier_cases.jsonl",
    invoke=lambda server, request: server.verify_body(request),
)


if __name__ == "__main__":
    ProRLStemServer.run_webserver()
