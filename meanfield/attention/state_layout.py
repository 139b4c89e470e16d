"""The ``state_dict`` layouts of :class:`~meanfield.attention.mha.KernelAttention`: torch's.

:class:`torch.nn.MultiheadAttention` stores its query, key and value projections packed
(``in_proj_weight``, shape ``(3E, E)``) when ``kdim == vdim == embed_dim`` and as separate
blocks (``q_proj_weight``, ``k_proj_weight``, ``v_proj_weight``) otherwise. The two hooks
here let a :class:`~meanfield.attention.mha.KernelAttention` save torch's layout and load
either one: a ``tie_qk`` module (one block for queries and keys, which torch has not) saves
the shared block as both Q and K and loads only a state whose Q and K blocks are equal; a
state without ``feature_map.*`` keys keeps the module's own feature map.

See Also
--------
meanfield.attention.mha.KernelAttention.from_mha, meanfield.attention.mha.KernelAttention.to_mha
"""

from __future__ import annotations

import torch

from .features import check_feature_states

__all__: list[str] = []

_SEPARATE = ("q_proj_weight", "k_proj_weight", "v_proj_weight")


def _tied_state_as_mha(module, state_dict, prefix, local_metadata) -> None:
    """state_dict post-hook: a ``tie_qk`` module saves ``nn.MultiheadAttention``'s keys.

    The shared block is written as both the Q and the K block (``in_proj_weight`` when
    ``vdim == embed_dim``, else ``q_proj_weight`` and ``k_proj_weight``), so any consumer of
    torch's layout reads it; :func:`_load_state_pre_hook` folds it back (checking Q = K).
    """
    if not module.tie_qk:
        return
    p = prefix
    w = state_dict.pop(p + "qk_proj_weight")
    wv = state_dict.pop(p + "v_proj_weight")
    b = state_dict.pop(p + "qk_proj_bias", None)
    bv = state_dict.pop(p + "v_proj_bias", None)
    if module.vdim == module.embed_dim:
        state_dict[p + "in_proj_weight"] = torch.cat([w, w, wv])
    else:
        state_dict[p + "q_proj_weight"] = w
        state_dict[p + "k_proj_weight"] = w.clone()  # not aliased: torch's blocks are separate
        state_dict[p + "v_proj_weight"] = wv
    if b is not None:
        state_dict[p + "in_proj_bias"] = torch.cat([b, b, bv])


def _load_state_pre_hook(
    module, state_dict, prefix, local_metadata, strict, missing, unexpected, errors
):
    """load_state_dict pre-hook: torch's layouts into this module's.

    A packed ``in_proj_weight`` loads into a module with separate blocks and vice versa (when
    the widths allow; otherwise the keys are left for torch to report), and into a ``tie_qk``
    module when its Q and K blocks are equal (a clear error otherwise). A state_dict without
    ``feature_map.*`` keys keeps the module's own feature map (class notes).
    """
    E, p = module.embed_dim, prefix
    # before any tensor is copied: a state of another feature map is refused by name (a
    # kernel state into a softmax module: torch's strict check names the feature_map keys)
    fm_prefix = p + "feature_map."
    if module.feature_map is not None:
        check_feature_states(module.feature_map, state_dict, fm_prefix)
    packed = state_dict.get(p + "in_proj_weight")
    sep = [state_dict.get(p + n) for n in _SEPARATE]
    if module.tie_qk:
        _fold_tied(module, state_dict, p, packed, sep)
    elif module.in_proj_weight is None:
        if packed is not None and packed.ndim == 2 and packed.shape[0] == 3 * E:
            del state_dict[p + "in_proj_weight"]
            for name, t in zip(_SEPARATE, packed.split(E), strict=True):
                state_dict[p + name] = t
    elif packed is None and all(t is not None and t.shape == (E, E) for t in sep):
        for name in _SEPARATE:
            del state_dict[p + name]
        state_dict[p + "in_proj_weight"] = torch.cat(sep)
    if module.feature_map is not None:
        if not any(key.startswith(fm_prefix) for key in state_dict):
            # nn.MultiheadAttention's (or a softmax module's) state_dict: keep our Omega
            state_dict.update(module.feature_map.state_dict(prefix=fm_prefix))


def _fold_tied(module, state_dict, p, packed, sep) -> None:
    """torch's Q, K, V blocks into a ``tie_qk`` module's ``qk_proj_*`` / ``v_proj_*``."""
    E = module.embed_dim
    if packed is not None and packed.ndim == 2 and packed.shape[0] == 3 * E:
        del state_dict[p + "in_proj_weight"]
        wq, wk, wv = packed.split(E)
    elif packed is None and all(t is not None for t in sep):
        for name in _SEPARATE:
            del state_dict[p + name]
        wq, wk, wv = sep
    else:
        return  # not torch's layout: left for load_state_dict to report
    bias = state_dict.pop(p + "in_proj_bias", None)
    biases = [None] * 3 if bias is None else list(bias.split(E))
    for name, pair in (("weight", (wq, wk)), ("bias", biases[:2])):
        if pair[0] is not None and not torch.equal(pair[0], pair[1]):
            raise ValueError(
                f"cannot load an nn.MultiheadAttention state_dict into tie_qk=True: its "
                f"query and key projection {name}s differ"
            )
    state_dict[p + "qk_proj_weight"] = wq
    state_dict[p + "v_proj_weight"] = wv
    if bias is not None:
        state_dict[p + "qk_proj_bias"] = biases[0]
        state_dict[p + "v_proj_bias"] = biases[2]
