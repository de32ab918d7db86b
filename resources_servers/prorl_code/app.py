"""prorl_code: write a program with bash, editor and Python tools; hidden tests (HumanEval
function style, or stdin/stdout pairs with partial credit) run in test-only sandboxes, each test
its own isolated process with time, memory and output limits. Logic: `nemo_gym_prorl.tasks.code`."""

from pathlib import Path

from nemo_gym.verifier_fixture import VerifierFixture
from pydantic import Field

from nemo_gym_prorl.tasks.code import CodeConfig, CodeTask
from nemo_gym_prorl.tasks.gym_server import ProRLServerConfig, ProRLTaskServer, ProRLVerifyRequest


class ProRLCodeConfig(ProRLServerConfig):
    code: CodeConfig = Field(default_factory=CodeConfig)


class ProRLCodeServer(ProRLTaskServer):
    config: ProRLCodeConfig
    task_tools = ("bash", "editor", "ipython")

    def make_task(self) -> CodeTask:
        return CodeTask(self.config.code)


def _fixture_server() -> ProRLCodeServer:
    from unittest.mock import MagicMock

    from nemo_gym.server_utils import ServerClient

    config = ProRLCodeConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="prorl_code", domain="coding",
                             code=CodeConfig(isolation="sandbox"))  # fmt: skip
    return ProRLCodeServer(config=config, server_client=MagicMock(spec=ServerClient))


VERIFIER_FIXTURE = VerifierFixture(
    server_factory=_fixture_server,
    request_model=ProRLVerifyRequest,
    cases_path=Path(__file__).parent / "tests" / "verifier_cases.jsonl",
    invoke=lambda server, request: server.verify_body(request),
)


if __name__ == "__main__":
    ProRLCodeServer.run_webserver()
