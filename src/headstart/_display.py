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
# the same inside any text (a driver message quoting the DSN), and password=... parameters
_USERINFO_ANYWHERE = re.compile(r"(?P<head>\b[A-Za-z][\w+.-]*://[^:/@?#\s]*:)[^/?#@\s]+@")
_PASSWORD_PARAMETER = re.compile(r"(?i)(?P<head>\bpass(?:word)?\s*=\s*)[^&\s'\"]+")
_MIN_SECRET = 4  # shorter remembered passwords are masked only by the patterns above


def _remember(password: str) -> None:
    if len(password) >= _MIN_SECRET and password != "***":
        from urllib.parse import quote, unquote

        with _LOCK:  # as given, and as drivers and URLs print it (quoted and unquoted)
            _SECRETS.update({password, unquote(password), quote(password, safe="")})


def mask_url(url: str) -> str:
    """``url`` with its password shown as ``***`` (and the password remembered for
    :func:`redact`). URLs without a password are returned as given (``sqlite:///:memory:``
    stays readable); a URL SQLAlchemy cannot parse (say, a non-numeric port) is masked by
    pattern, as is a ``?password=`` query parameter."""
    if not isinstance(url, str):
        return url
    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        for key in ("password", "pass"):
            value = parsed.query.get(key)
            if isinstance(value, str):
                _remember(value)
        if parsed.password:
            _remember(str(parsed.password))
            return redact(parsed.render_as_string(hide_password=True))
    except Exception:  # unparseable: fall through to the pattern
        pass
    found = _USERINFO.match(url)
    if found is not None:
        _remember(found["password"])
        url = found["head"] + "***@" + url[found.end() :]
    return redact(url)


def remember_url(url: str) -> None:
    """Remember ``url``'s password, if it has one, so that :func:`redact` hides it."""
    mask_url(url)


def redact(text: str) -> str:
    """``text`` with passwords replaced by ``***``: those of URLs and ``password=`` parameters
    anywhere in it, and every remembered password standing as a word of its own (so that a
    password such as ``postgres`` does not mangle ``postgresql://``)."""
    if not isinstance(text, str):
        return text
    text = _USERINFO_ANYWHERE.sub(lambda m: m["head"] + "***@", text)
    text = _PASSWORD_PARAMETER.sub(lambda m: m["head"] + "***", text)
    if not _SECRETS:
        return text
    with _LOCK:
        secrets = sorted(_SECRETS, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = re.sub(rf"(?<![\w]){re.escape(secret)}(?![\w])", "***", text)
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
