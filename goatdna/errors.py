"""The one exception type for user errors.

Anything the user can fix (a bad file, a wrong option, a config key that does not exist) is raised
as `GoatDNAError` with a message that says what is wrong and what to do. The CLI prints it as a
single line and exits with status 2; any other exception is a bug and keeps its traceback.
"""


class GoatDNAError(Exception):
    """A user-facing error: bad input, bad config, or a state the user must resolve."""
