"""Scratch: HEAD's Hopper backward (gb_head.py) with a negative softmax scale, against the float64 reference."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import gb_head

import flashattn2

sys.modules["flashattn2._gluon_backward"] = gb_head
flashattn2._gluon_backward = gb_head
gb_head.MIN_SEQ_LEN = gb_head.MIN_SCORES = 0
from flashattn2 import flash_attention
from flashattn2.testing import assert_attention_matches_reference
import flashattn2._triton_backward as backward

q, k, v = (torch.randn(1, 2, 1000, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
plan = backward.plan_for(q, q, k, v, q, True, -0.3)
print("hopper plan:", plan.hopper is not None)
try:
    assert_attention_matches_reference(lambda q, k, v, c: flash_attention(q, k, v, causal=c, softmax_scale=-0.3), q, k, v,
                                       causal=True, softmax_scale=-0.3)
    print("HEAD kernel: passed")
except AssertionError as e:
    print("HEAD kernel: FAILED:", str(e)[:300])
print("launched:", plan.hopper.launched if plan.hopper else None)
