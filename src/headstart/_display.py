r"""Text a user or an imported file controls, made safe to show.

Passwords never leave headstart: one registry of the secrets it has seen, applied to every
message.

:func:`mask_url` renders a database URL with its password as ``***`` and remembers the password;
:func:`redact` removes every remembered password from a text. :class:`HeadstartError` redacts
its message, the CLI's console redacts everything it writes, so a password that reached any
storage, source or option cannot be printed, whatever path the text took (a help default, an
error raised three layers down, a driver message quoting the DSN).

Names are shown as written: :func:`safe_text` escapes control characters for terminals, and
:func:`literal` / :func:`literal_text` keep matplotlib from reading a ``$`` as mathtext.
"""

from __future__ import annotations

import re
import threading

_SECRETS: set[str] = set()
_LOCK = threading.Lock()
# scheme://user:password@host..., up to the last "@" before the path: when the URL does not parse,
# mask more rather than less (a password may hold an unescaped "@" or ":").
_USERINFO = re.compile(r"^(?P<head>[A-Za-z][\w+.-]*://[^:/@?#]*:)(?P<password>[^/?#]*)@")


def _remember(password: str) -> None:
    if password and password != "***":
        with _LOCK:
            _SECRETS.add(password)
            if "%" in password:  # a URL-quoted password is printed unquoted by drivers
                from urllib.parse import unquote

                _SECRETS.add(unquote(password))


def mask_url(url: str) -> str:
    """``url`` with its password shown as ``***`` (and the password remembered for
    :func:`redact`). URLs without a password are returned as given (``sqlite:///:memory:``
    stays readable); a URL SQLAlchemy cannot parse (say, a non-numeric port) is masked by
    pattern."""
    if not isinstance(url, str):
        return url
    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        if parsed.password:
            _remember(str(parsed.password))
            masked = parsed.render_as_string(hide_password=True)
            return redact(masked)
    except Exception:  # unparseable: fall through to the pattern
        pass
    found = _USERINFO.match(url)
    if found is None:
        return url
    _remember(found["password"])
    return redact(found["head"] + "***@" + url[found.end() :])


def remember_url(url: str) -> None:
    """Remember ``url``'s password, if it has one, so that :func:`redact` hides it."""
    mask_url(url)


def redact(text: str) -> str:
    """``text`` with every password headstart has seen replaced by ``***``."""
    if not _SECRETS or not isinstance(text, str):
        return text
    with _LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


_CONTROL = frozenset(c for c in (*range(32), 127) if chr(c) not in "\n\t")


def safe_text(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN``: a name cannot move the cursor,
    clear the screen or recolour the terminal."""
    if not any(ord(c) in _CONTROL for c in text):
        return text
    return "".join(f"\\x{ord(c):02x}" if ord(c) in _CONTROL else c for c in text)


def literal(text: object) -> str:
    """``text`` as a string matplotlib draws as written (``$`` escaped)."""
    return str(text).replace("$", r"\$")


def literal_text(fig: object) -> object:
    """Draw the figure's texts as written: a ``$`` in a study, parameter or choice name would
    otherwise start matplotlib's mathtext (an unbalanced one raises at ``savefig``).

    Call it once the texts are set and before anything draws the figure (``tight_layout``): the
    texts matplotlib adds when drawing, such as log-axis tick labels, are mathtext on purpose.
    Strings that reach an axis only when it is drawn (categorical bar labels) go through
    :func:`literal` instead.
    """
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        if "$" in text.get_text():
            text.set_parse_math(False)
    return fig
