"""benchmarks.peer_yoyodyne's parts that run without yoyodyne."""

import pytest

from benchmarks import peer_yoyodyne


def test_model_config_is_the_members_size(tmp_path):
    config = peer_yoyodyne.model_config(tmp_path, train_steps=300)
    model = config["model"]["init_args"]
    encoder = model["source_encoder"]["init_args"]
    # keras-attn's hidden size is both directions together.
    assert (encoder["hidden_size"], encoder["bidirectional"]) == (128, True)
    assert (model["embedding_size"], model["decoder_hidden_size"]) == (128, 256)
    assert (encoder["dropout"], model["decoder_dropout"]) == (0.3, 0.3)
    data = config["data"]
    assert (data["source_sep"], data["target_sep"], data["batch_size"]) == (
        " ",
        " ",
        64,
    )
    assert data["train"] == str(tmp_path / "train.tsv")
    assert config["trainer"]["max_steps"] == config["trainer"]["val_check_interval"]


@pytest.mark.tf_only
def test_write_data_writes_rare_words_as_unk(tmp_path):
    org = tmp_path / "data" / "org_data"
    org.mkdir(parents=True)
    for split in peer_yoyodyne.SPLITS:
        (org / f"{split}.src.txt").write_text("the cat sat .\nthe dog sat .\n")
        (org / f"{split}.tgt.txt").write_text("cat sat\ndog ran\n")
    size = peer_yoyodyne.write_data(tmp_path / "data", tmp_path / "run", 10000)
    # Seen twice at least: the, cat, sat, dog and "."; "ran" once.
    assert size == 4 + 5
    rows = (tmp_path / "run" / "dev.tsv").read_text().splitlines()
    assert rows == ["the cat sat .\tcat sat", "the dog sat .\tdog <unk>"]
    # 0: every word, as yoyodyne keeps them.
    assert peer_yoyodyne.write_data(tmp_path / "data", tmp_path / "all", 0) is None
    rows = (tmp_path / "all" / "dev.tsv").read_text().splitlines()
    assert rows[1] == "the dog sat .\tdog ran"


def test_stages_must_be_known(capsys):
    with pytest.raises(SystemExit):
        peer_yoyodyne.parse_args(["--stages", "train,translate"])
    assert "Received: translate" in capsys.readouterr().err
