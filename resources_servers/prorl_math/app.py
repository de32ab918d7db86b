"""prorl_math: math problems with a sandboxed IPython tool; `\\boxed{}` answers checked by math-verify
under a time limit enforced outside the checker. Logic: `nemo_gym_prorl.tasks.math`."""

from pathlib import Path

from nemo_gym.verifier_fixture import VerifierFixture
from pydantic import Field

from nemo_gym_prorl.tasks.gym_server import ProRLServerConfig, ProRLTaskServer, ProRLVerifyRequest
from nemo_gym_prorl.tasks.math import MathConfig, MathTask


class ProRLMathConfig(ProRLServerConfig):
    math: MathConfig = Field(default_factory=MathConfig)


class ProRLMathServer(ProRLTaskServer):
    config: ProRLMathConfig
    task_tools = ("ipython", "submit")

    def make_task(self) -> MathTask:
        return MathTask(self.config.math)


def _fixture_server() -> ProRLMathServer:
    from unittest.mock import MagicMock

    from nemo_gym.server_utils import ServerClient

    config = ProRLMathConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="prorl_math", domain="math")
    return ProRLMathServer(config=config, server_client=MagicMock(spec=ServerClient))


VERIFIER_FIXTURE = VerifierFixture(
    server_factory=_fixture_server,
    request_model=ProRLVerifyRequest,
    cases_path=Path(__file__).parent / "tests" / "verifier_cases.jsonl",
    invoke=lambda server, request: server.verify_body(request),
)


if __name__ == "__main__":
    ProRLMathServer.run_webserver()
