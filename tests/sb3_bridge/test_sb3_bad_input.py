"""Damaged or inconsistent checkpoints: each fails with a specific error naming file and member."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from float32_bound import assert_within, policy_outputs
from sb3_craft import read_data, read_member, rewrite_checkpoint, torch_state_dict_bytes

import sb3_bridge
from sb3_bridge import CheckpointError, UnsupportedCheckpointError
from sb3_bridge.torch_archive import read_state_dict


def _state(path):
    return read_state_dict(read_member(path, "policy.pth"), path)


def _with_state(src, dst, state):
    rewrite_checkpoint(src, dst, policy_pth=torch_state_dict_bytes(state))
    return dst


def _error(path, **kw) -> CheckpointError:
    with pytest.raises(CheckpointError) as err:
        sb3_bridge.load(path, **kw)
    assert err.value.path == str(path)
    assert str(path) in str(err.value)
    return err.value


# ------------------------------------------------------------------------------------ the file
def test_missing_file(tmp_path):
    err = _error(tmp_path / "nope.zip")
    assert err.member is None and "no such file" in str(err)


def test_directory_instead_of_file(tmp_path):
    assert "is a directory" in str(_error(tmp_path))


def test_not_a_zip(tmp_path):
    path = tmp_path / "model.zip"
    path.write_text("hello, I am a text file")
    err = _error(path)
    assert err.member is None and "not a zip file" in str(err)


def test_empty_file(tmp_path):
    path = tmp_path / "model.zip"
    path.write_bytes(b"")
    assert "not a zip file" in str(_error(path))


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.9, 0.999])
def test_truncated_zip(ppo_box, tmp_path, fraction):
    blob = ppo_box.read_bytes()
    path = tmp_path / "cut.zip"
    path.write_bytes(blob[: int(len(blob) * fraction)])
    err = _error(path)
    # The reason, not str(err): the pytest tmp_path of this test holds the word "truncated".
    assert err.member is None and "truncated" in err.reason


def test_corrupt_member_fails_its_crc(ppo_box, tmp_path):
    path = tmp_path / "flipped.zip"
    blob = bytearray(ppo_box.read_bytes())
    with zipfile.ZipFile(ppo_box) as zf:
        info = zf.getinfo("policy.pth")
    # Flip a byte inside policy.pth's compressed data (past its 30-byte local header and name).
    pos = info.header_offset + 30 + len(info.filename) + 100
    blob[pos] ^= 0xFF
    path.write_bytes(bytes(blob))
    err = _error(path)
    assert err.member == "policy.pth" and "corrupt" in str(err)


# ------------------------------------------------------------------------------------- members
@pytest.mark.parametrize("member", ["data", "policy.pth"])
def test_missing_member(ppo_box, tmp_path, member):
    path = tmp_path / "m.zip"
    rewrite_checkpoint(ppo_box, path, drop=(member,))
    err = _error(path)
    assert err.member == member and "member missing" in str(err)


def test_malformed_json(ppo_box, tmp_path):
    path = tmp_path / "m.zip"
    text = read_member(ppo_box, "data").decode()
    rewrite_checkpoint(ppo_box, path, data=text[: len(text) // 2].encode())
    err = _error(path)
    assert err.member == "data" and "malformed JSON at line" in str(err)


def test_data_not_utf8(ppo_box, tmp_path):
    path = tmp_path / "m.zip"
    rewrite_checkpoint(ppo_box, path, data=b"\xff\xfe\x00garbage")
    assert _error(path).member == "data"


@pytest.mark.parametrize("data,match", [([1, 2, 3], "expected a JSON object"),
                                        ({"verbose": 0}, "no 'policy_class' entry")])
def test_data_without_model_entries(ppo_box, tmp_path, data, match):
    path = tmp_path / "m.zip"
    rewrite_checkpoint(ppo_box, path, data=data)
    err = _error(path)
    assert err.member == "data" and match in str(err)


def test_policy_pth_not_a_torch_archive(ppo_box, tmp_path):
    path = tmp_path / "m.zip"
    rewrite_checkpoint(ppo_box, path, policy_pth=b"garbage that is not a zip")
    err = _error(path)
    assert err.member == "policy.pth" and "not a torch zip archive" in str(err)


def test_policy_pth_truncated(ppo_box, tmp_path):
    path = tmp_path / "m.zip"
    blob = read_member(ppo_box, "policy.pth")
    rewrite_checkpoint(ppo_box, path, policy_pth=blob[: len(blob) // 2])
    err = _error(path)
    assert err.member == "policy.pth" and "truncated or corrupt" in str(err)


def test_missing_storage_entry(ppo_box, tmp_path):
    blob = read_member(ppo_box, "policy.pth")
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(blob)) as zin, zipfile.ZipFile(out, "w") as zout:
        for name in zin.namelist():
            if name != "archive/data/3":
                zout.writestr(name, zin.read(name))
    path = tmp_path / "m.zip"
    rewrite_checkpoint(ppo_box, path, policy_pth=out.getvalue())
    err = _error(path)
    assert err.member == "policy.pth:archive/data/3" and "missing" in str(err)


def test_storage_with_wrong_byte_count(ppo_box, tmp_path):
    blob = read_member(ppo_box, "policy.pth")
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(blob)) as zin, zipfile.ZipFile(out, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            zout.writestr(name, data[:-4] if name == "archive/data/1" else data)
    path = tmp_path / "m.zip"
    rewrite_checkpoint(ppo_box, path, policy_pth=out.getvalue())
    err = _error(path)
    assert err.member == "policy.pth:archive/data/1" and "expected" in str(err)


def test_pickle_that_is_not_a_state_dict(ppo_box, tmp_path):
    path = tmp_path / "m.zip"
    import pickle
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps([1, 2, 3], protocol=2))
    rewrite_checkpoint(ppo_box, path, policy_pth=out.getvalue())
    err = _error(path)
    assert err.member == "policy.pth:archive/data.pkl" and "expected a state_dict" in str(err)


def test_garbled_pickle(ppo_box, tmp_path):
    path = tmp_path / "m.zip"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("archive/data.pkl", b"\x80\x02}q\x00(X\x03")
    rewrite_checkpoint(ppo_box, path, policy_pth=out.getvalue())
    err = _error(path)
    assert err.member == "policy.pth:archive/data.pkl" and "malformed state_dict pickle" in str(err)


# ------------------------------------------------------------------------------------- tensors
def test_transposed_weight_is_a_shape_error(ppo_box, tmp_path):
    state = _state(ppo_box)
    state["mlp_extractor.policy_net.2.weight"] = np.ascontiguousarray(
        np.concatenate([state["mlp_extractor.policy_net.2.weight"]] * 2, axis=1))
    err = _error(_with_state(ppo_box, tmp_path / "m.zip", state))
    assert err.member == "policy.pth"
    assert "mlp_extractor.policy_net.2.weight has shape (32, 64)" in str(err)


def test_bias_of_wrong_length(ppo_box, tmp_path):
    state = _state(ppo_box)
    state["action_net.bias"] = np.zeros(3, np.float32)
    assert "action_net.bias has shape (3,), expected (1,)" in str(_error(_with_state(ppo_box, tmp_path / "m.zip", state)))


def test_log_std_of_wrong_length(ppo_box, tmp_path):
    state = _state(ppo_box)
    state["log_std"] = np.zeros(2, np.float32)
    assert "log_std has shape (2,), expected (1,)" in str(_error(_with_state(ppo_box, tmp_path / "m.zip", state)))


def test_observation_size_disagreeing_with_data(ppo_box, tmp_path):
    data = read_data(ppo_box)
    data["observation_space"]["_shape"] = [5]
    path = tmp_path / "m.zip"
    rewrite_checkpoint(ppo_box, path, data=data)
    assert "first layer takes 3 inputs but data's observation_space has shape [5]" in str(_error(path))


def test_net_arch_disagreeing_with_weights(ppo_box, tmp_path):
    data = read_data(ppo_box)
    data["policy_kwargs"]["net_arch"] = {"pi": [64, 64], "vf": [64, 64]}
    path = tmp_path / "m.zip"
    rewrite_checkpoint(ppo_box, path, data=data)
    assert "weights have pi=[32, 32]" in str(_error(path))


def test_missing_tensor(ppo_box, tmp_path):
    state = _state(ppo_box)
    del state["value_net.bias"]
    err = _error(_with_state(ppo_box, tmp_path / "m.zip", state))
    assert "missing ['value_net.bias']" in str(err)


def test_unexpected_tensor(ppo_box, tmp_path):
    state = _state(ppo_box)
    state["mlp_extractor.policy_net.5.weight"] = np.zeros((2, 2), np.float32)
    err = _error(_with_state(ppo_box, tmp_path / "m.zip", state))
    assert "unexpected ['mlp_extractor.policy_net.5.weight']" in str(err) and "indices 0, 2, 4" in str(err)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_weights(ppo_box, tmp_path, bad):
    state = _state(ppo_box)
    state["mlp_extractor.value_net.0.weight"][3, 1] = bad
    err = _error(_with_state(ppo_box, tmp_path / "m.zip", state))
    assert err.member == "policy.pth"
    assert "mlp_extractor.value_net.0.weight has 1 non-finite value(s)" in str(err)


def test_integer_weights(ppo_box, tmp_path):
    state = _state(ppo_box)
    state["action_net.bias"] = np.zeros(1, np.int64)
    assert "action_net.bias has dtype int64" in str(_error(_with_state(ppo_box, tmp_path / "m.zip", state)))


def test_float64_weights_are_accepted_and_cast(ppo_box, tmp_path, expected):
    state = {k: v.astype(np.float64) for k, v in _state(ppo_box).items()}
    policy = sb3_bridge.load(_with_state(ppo_box, tmp_path / "m.zip", state))
    assert policy.params["actor"]["net"]["dense_0"]["kernel"].dtype == np.float32
    # the cast is exact (the weights were float32): SB3's recorded mode within float32 rounding
    mean, bound = policy_outputs(policy, expected["ppo_box/obs"])["mode"]
    assert_within(policy.act(expected["ppo_box/obs"]), mean, bound, "mode (JAX)", n_evaluations=1)
    assert_within(expected["ppo_box/mode"], mean, bound, "mode (SB3)", n_evaluations=1)


# --------------------------------------------------------------------------------- unsupported
def _unsupported(path) -> str:
    with pytest.raises(UnsupportedCheckpointError) as err:
        sb3_bridge.load(path)
    info = sb3_bridge.inspect(path)
    assert not info.supported and "NOT LOADABLE" in info.summary()
    return str(err.value)


def _edit(ppo_box, tmp_path, fn):
    data = read_data(ppo_box)
    fn(data)
    path = tmp_path / "u.zip"
    rewrite_checkpoint(ppo_box, path, data=data)
    return path


def test_gsde_is_unsupported(ppo_box, tmp_path):
    state = _state(ppo_box)
    state["log_std"] = np.zeros((32, 1), np.float32)
    rewrite_checkpoint(ppo_box, tmp_path / "s.zip", policy_pth=torch_state_dict_bytes(state))
    data = read_data(tmp_path / "s.zip")
    data["use_sde"] = True
    rewrite_checkpoint(tmp_path / "s.zip", tmp_path / "u.zip", data=data)
    msg = _unsupported(tmp_path / "u.zip")
    assert "gSDE" in msg and "supported: the default Gaussian" in msg


def test_off_policy_algorithm_is_unsupported(ppo_box, tmp_path):
    def fn(d):
        d["buffer_size"] = 1000
        d["policy_class"]["__init__"] = "<function SACPolicy.__init__ at 0x0>"
    msg = _unsupported(_edit(ppo_box, tmp_path, fn))
    assert "SACPolicy" in msg and "supported: PPO, A2C, TRPO" in msg


def test_cnn_policy_is_unsupported(ppo_box, tmp_path):
    def fn(d):
        d["policy_class"]["__init__"] = "<function ActorCriticCnnPolicy.__init__ at 0x0>"
        d["observation_space"]["_shape"] = [84, 84, 3]
    msg = _unsupported(_edit(ppo_box, tmp_path, fn))
    assert "ActorCriticCnnPolicy (CNN observations)" in msg and "supported: MlpPolicy" in msg


def test_dict_observations_are_unsupported(ppo_box, tmp_path):
    def fn(d):
        d["policy_class"]["__init__"] = "<function MultiInputActorCriticPolicy.__init__ at 0x0>"
        d["observation_space"] = {":type:": "<class 'gymnasium.spaces.dict.Dict'>", ":serialized:": "AA=="}
    msg = _unsupported(_edit(ppo_box, tmp_path, fn))
    assert "dict observations" in msg and "supported: 1-D Box observations" in msg


def test_shared_layers_are_unsupported(ppo_box, tmp_path):
    state = _state(ppo_box)
    state["mlp_extractor.shared_net.0.weight"] = np.zeros((3, 3), np.float32)
    msg = _unsupported(_with_state(ppo_box, tmp_path / "u.zip", state))
    assert "layers shared between actor and critic" in msg


def test_custom_features_extractor_is_unsupported(ppo_box, tmp_path):
    def fn(d):
        d["policy_kwargs"]["features_extractor_class"] = "<class 'my.module.MyExtractor'>"
    msg = _unsupported(_edit(ppo_box, tmp_path, fn))
    assert "features extractor MyExtractor; supported: FlattenExtractor" in msg


def test_unmapped_activation_is_unsupported(ppo_box, tmp_path):
    def fn(d):
        d["policy_kwargs"]["activation_fn"] = "<class 'torch.nn.modules.activation.Softsign'>"
    msg = _unsupported(_edit(ppo_box, tmp_path, fn))
    assert "activation Softsign; supported: Tanh, ReLU" in msg


def test_multibinary_actions_are_unsupported(ppo_box, tmp_path):
    def fn(d):
        d["action_space"][":type:"] = "<class 'gymnasium.spaces.multi_binary.MultiBinary'>"
    msg = _unsupported(_edit(ppo_box, tmp_path, fn))
    assert "MultiBinary action space; supported: Box (Gaussian) and Discrete" in msg


def test_different_actor_and_critic_widths_load_as_separate_towers(ppo_box, tmp_path):
    state = _state(ppo_box)
    state["mlp_extractor.value_net.0.weight"] = np.zeros((8, 3), np.float32)
    state["mlp_extractor.value_net.0.bias"] = np.zeros(8, np.float32)
    state["mlp_extractor.value_net.2.weight"] = np.zeros((32, 8), np.float32)
    data = read_data(ppo_box)
    data["policy_kwargs"] = {"net_arch": {"pi": [32, 32], "vf": [8, 32]}}
    rewrite_checkpoint(ppo_box, tmp_path / "u.zip", data=data, policy_pth=torch_state_dict_bytes(state))
    policy = sb3_bridge.load(tmp_path / "u.zip")
    assert policy.model.hidden == (32, 32) and policy.model.critic_hidden == (8, 32)
    # declared widths that disagree with the weights are still refused, naming both
    data["policy_kwargs"] = {"net_arch": {"pi": [32, 32], "vf": [16, 32]}}
    rewrite_checkpoint(ppo_box, tmp_path / "v.zip", data=data, policy_pth=torch_state_dict_bytes(state))
    with pytest.raises(sb3_bridge.CheckpointError, match=r"vf=\[8, 32\].*net_arch"):
        sb3_bridge.load(tmp_path / "v.zip")


def test_live_sb3_unsupported_models(tmp_path):
    """Real SAC and gSDE checkpoints written by SB3 (skipped without SB3)."""
    pytest.importorskip("torch")
    sb3 = pytest.importorskip("stable_baselines3")
    sac = sb3.SAC("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(net_arch=[8]), device="cpu")
    sac.save(tmp_path / "sac.zip")
    assert "SACPolicy" in _unsupported(tmp_path / "sac.zip")
    sde = sb3.PPO("MlpPolicy", "Pendulum-v1", use_sde=True, policy_kwargs=dict(net_arch=[8]), device="cpu")
    sde.save(tmp_path / "sde.zip")
    assert "gSDE" in _unsupported(tmp_path / "sde.zip")


def test_data_larger_than_its_limit_is_not_read(ppo_box, tmp_path, monkeypatch):
    from sb3_bridge import archive
    monkeypatch.setattr(archive, "MAX_DATA_BYTES", 1000)  # data is ~10 KB
    err = _error(ppo_box)
    assert err.member == "data" and "more than the 1000-byte limit" in str(err)
    assert "MAX_DATA_BYTES" in str(err)


def test_torch_entry_larger_than_the_limit_is_not_read(ppo_box, tmp_path, monkeypatch):
    from sb3_bridge import archive
    state = _state(ppo_box)
    state["log_std"] = np.zeros(300_000, np.float32)  # a 1.2 MB storage
    blob = torch_state_dict_bytes(state)
    monkeypatch.setattr(archive, "MAX_CHECKPOINT_BYTES", 1_000_000)
    with pytest.raises(CheckpointError, match=r"policy.pth:archive/data/0.*1000000-byte limit per checkpoint"):
        read_state_dict(blob, "m.zip")


def test_log_std_with_discrete_actions_is_named(fixtures_dir, tmp_path):
    src = fixtures_dir / "ppo_discrete.zip"
    state = _state(src)
    state["log_std"] = np.zeros(2, np.float32)
    err = _error(_with_state(src, tmp_path / "m.zip", state))
    assert "unexpected ['log_std']" in str(err) and "Discrete action space" in str(err)


def test_box_actions_without_log_std_are_named(ppo_box, tmp_path):
    state = _state(ppo_box)
    del state["log_std"]
    err = _error(_with_state(ppo_box, tmp_path / "m.zip", state))
    assert "missing ['log_std']" in str(err) and "Box action space" in str(err)


def test_multi_dimensional_box_actions_load_flat(ppo_box, tmp_path):
    # The paper's v1 env had a Box of shape (1, 3); SB3 flattens it for action_net (3 outputs).
    state = _state(ppo_box)
    rng = np.random.default_rng(0)
    state["action_net.weight"] = rng.standard_normal((3, 32)).astype(np.float32)
    state["action_net.bias"] = np.zeros(3, np.float32)
    state["log_std"] = np.zeros(3, np.float32)
    data = read_data(ppo_box)
    data["action_space"].update({"_shape": [1, 3], "low": "[[-1. -1. -1.]]", "high": "[[1. 1. 1.]]"})
    path = tmp_path / "v1.zip"
    rewrite_checkpoint(ppo_box, path, data=data, policy_pth=torch_state_dict_bytes(state))
    policy = sb3_bridge.load(path)
    assert policy.model.action_shape == (3,)
    assert policy.act(np.zeros(3, np.float32)).shape == (3,)
    assert policy.metadata["action_space"]["shape"] == [1, 3]
    data["action_space"]["_shape"] = [2, 3]
    rewrite_checkpoint(ppo_box, path, data=data, policy_pth=torch_state_dict_bytes(state))
    assert "action_net has 3 outputs but data's action_space has shape [2, 3]" in str(_error(path))
