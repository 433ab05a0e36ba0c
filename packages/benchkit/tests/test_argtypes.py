"""benchkit.argtypes: numeric option converters accept what they promise and say what they expect."""

import argparse

import pytest

from benchkit.argtypes import non_negative_int, positive_float, positive_int


def test_converters_accept_and_reject():
    assert positive_int("3") == 3 and non_negative_int("0") == 0 and positive_float("2.5e9") == 2.5e9
    for convert, text, message in ((positive_int, "0", "integer >= 1"), (non_negative_int, "-1", "integer >= 0"),
                                   (positive_float, "0", "positive finite"), (positive_float, "inf", "positive finite")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            convert(text)
