"""Rollout: engines that sample continuations (HF, vLLM) and the controller that batches
requests from many concurrent agent loops onto them."""
