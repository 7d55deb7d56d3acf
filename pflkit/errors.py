"""Errors the kit raises for bad input; the command line turns them into one line on stderr."""


class PflkitError(Exception):
    """Bad input or an impossible request, explained in one line."""


class DataUnavailable(PflkitError):
    """A dataset's files are not on this machine; the message says how to get them."""


class TrainingDiverged(PflkitError):
    """A loss became NaN or infinite."""


class NotInStore(PflkitError):
    """A read-only store (``make book`` without ``FILL=1``) lacks runs a sweep needs: they are not
    computed, and the book marks the chapter "not computed yet" from that sweep on."""
