"""``example_interfaces``: the classic service example."""

from ferry.idl import int64, message, service

__all__ = ["AddTwoInts"]


@service("example_interfaces/srv/AddTwoInts")
class AddTwoInts:
    """Adds two integers."""

    @message("example_interfaces/srv/AddTwoInts_Request")
    class Request:
        """The two operands."""

        a: int64 = 0
        b: int64 = 0

    @message("example_interfaces/srv/AddTwoInts_Response")
    class Response:
        """Their sum."""

        sum: int64 = 0
