"""The one exception type for user errors.

Anything the user can fix (a bad file, a wrong option, a config key that does not exist) is raised
as `GoatDNAError` with a message that says what is wrong and what to do. The CLI prints it as a
single line and exits with status 2; any other exception is a bug and keeps its traceback.
"""


class GoatDNAError(Exception):
    """A user-facing error: bad input, bad config, or a state the user must resolve."""


class Interrupted(GoatDNAError):
    """The user (Ctrl-C) or the cluster (SIGTERM) stopped a long job; what it finished is kept.

    The CLI prints it as ``interrupted: <message>`` and exits with ``128 + signal`` (130 for
    Ctrl-C, 143 for SIGTERM), the shell's convention for a job ended by a signal.
    """

    prefix = "interrupted"

    def __init__(self, message: str, signum: int = 2) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum
