"""Checks a Hugging Face Hub endpoint (kiln's fake Hub in tests) with the official clients.

    python hub-check.py client REPO WORK_DIR
    python hub-check.py load REPO [CONFIG:SPLIT=ROWS ...]

HF_ENDPOINT names the Hub and HF_TOKEN the token; HF_HUB_DISABLE_XET=1 makes `huggingface_hub`
upload through the LFS protocol (the only one the fake speaks; the real Hub speaks both).

`client`: `huggingface_hub` creates the dataset repository REPO and uploads a folder with a card,
a Parquet shard and a binary file in one commit (a file larger than the Hub's part size goes in
parts); the listing and every downloaded file must equal what was uploaded; uploading the same
folder again must make no commit; `datasets.load_dataset(REPO)` must read the shard's rows.

`load`: `datasets.load_dataset(REPO, CONFIG, split=SPLIT)` must give ROWS rows for every
argument (CONFIG `default` for the default config), and pandas must read the same rows through
`hf://` paths.

Prints one line per check and exits 1 if any fails.
"""

import os
import sys
from pathlib import Path

from checks import check, failures, finish


def client(repo, work):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq
    from huggingface_hub import HfApi

    api = HfApi(endpoint=os.environ["HF_ENDPOINT"], token=os.environ["HF_TOKEN"])
    folder = Path(work) / "upload"
    (folder / "data").mkdir(parents=True, exist_ok=True)
    rows = [{"instance_id": f"o__r-{i}", "value": i} for i in range(7)]
    pq.write_table(pa.Table.from_pylist(rows), folder / "data" / "train-00000-of-00001.parquet")
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n---\n\n# check\n"
    )
    blob = os.urandom(3 * 1024 * 1024 + 17)
    (folder / "blob.bin").write_bytes(blob)

    url = api.create_repo(repo, repo_type="dataset", exist_ok=True)
    check(str(url).endswith(f"/datasets/{repo}"), f"create_repo gives the repository address ({url})")
    info = api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", commit_message="first")
    check(bool(info.oid), f"upload_folder made commit {info.oid}")
    files = sorted(api.list_repo_files(repo, repo_type="dataset"))
    expected = sorted([".gitattributes", "README.md", "blob.bin", "data/train-00000-of-00001.parquet"])
    check(files == expected, f"the repository lists {files}")
    for name in expected[1:]:
        path = api.hf_hub_download(repo, name, repo_type="dataset", cache_dir=str(Path(work) / "cache"))
        check(Path(path).read_bytes() == (folder / name).read_bytes(), f"{name} downloads as uploaded")
    again = api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", commit_message="again")
    check(again.oid == info.oid, f"uploading the same files again makes no commit ({again.oid})")
    loaded = datasets.load_dataset(repo, split="train", cache_dir=str(Path(work) / "datasets"))
    check(loaded.num_rows == 7 and loaded[3]["instance_id"] == "o__r-3", f"datasets loads {loaded.num_rows} rows")


def load(repo, wanted):
    import datasets
    import pandas as pd
    from huggingface_hub import HfFileSystem

    fs = HfFileSystem(endpoint=os.environ["HF_ENDPOINT"], token=os.environ.get("HF_TOKEN"))
    for item in wanted:
        config_split, rows = item.split("=")
        config, split = config_split.split(":")
        name = None if config == "default" else config
        loaded = datasets.load_dataset(repo, name, split=split)
        check(loaded.num_rows == int(rows), f"{config}:{split}: datasets loads {loaded.num_rows} rows, expected {rows}")
        if loaded.num_rows:
            ids = loaded["instance_id"]
            check(len(set(ids)) == len(ids), f"{config}:{split}: no instance twice")
    # pandas over hf:// paths, as a user without `datasets` reads a release.
    shards = sorted(fs.glob(f"datasets/{repo}/releases/*/data/*.parquet"))
    check(bool(shards), f"hf:// lists {len(shards)} shards")
    total = sum(len(pd.read_parquet(f"hf://{shard}", storage_options={"endpoint": os.environ["HF_ENDPOINT"]})) for shard in shards)
    check(total > 0, f"pandas reads {total} rows over hf://")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    command, repo = sys.argv[1], sys.argv[2]
    if command == "client":
        client(repo, sys.argv[3])
    elif command == "load":
        load(repo, sys.argv[3:])
    else:
        sys.exit(__doc__)
    finish()


if __name__ == "__main__":
    main()
