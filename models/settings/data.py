"""Where a run's data comes from: `DataSource`, the record every stage
takes and the export keeps.

Plain dataclass with no TensorFlow import, like the other settings.
"""

import dataclasses

from models.settings.folder_layout import DATA_SOURCE_FILE
from models.settings.json_files import read_json, write_json

# The splits of a dataset, by their TFDS names (`models.data.load_split`).
SPLITS = ("train", "validation", "test")


@dataclasses.dataclass(frozen=True)
class DataSource:
    """A dataset, where it is read from, and the names of its features.

    Every stage that reads data takes it whole: `load_split(split, source)`
    (`models.data`) reads a split of it. A run folder and its export record
    the source they were trained on (`data_source.json`), so that
    `models.evaluation` reads the same features.

    Attributes:
        dataset: The TFDS dataset name.
        data_dir: A local copy of the dataset's source (an `org_data`
            folder, its parent, or `ggw_data.zip`), None to download it.
        tfds_dir: Where TFDS keeps prepared datasets (None: TFDS's own).
        document_key: The feature holding the text.
        summary_key: The feature holding the headline.

    Example:

    >>> source = DataSource(document_key="article", summary_key="title")
    >>> source.dataset, source.document_key
    ('gigaword', 'article')
    """

    dataset: str = "gigaword"
    data_dir: str | None = None
    tfds_dir: str | None = None
    document_key: str = "document"
    summary_key: str = "summary"

    def write(self, folder):
        """Records the source in `folder` (a run folder or an export)."""
        write_json(f"{folder}/{DATA_SOURCE_FILE}", dataclasses.asdict(self))

    @classmethod
    def for_model(cls, folder, dataset="gigaword", data_dir=None, tfds_dir=None):
        """`dataset` read from `data_dir` and `tfds_dir`, with the feature
        names recorded in `folder` (`recorded`): those the model there was
        trained on."""
        return dataclasses.replace(
            cls.recorded(folder), dataset=dataset, data_dir=data_dir, tfds_dir=tfds_dir
        )

    @classmethod
    def recorded(cls, folder):
        """The source recorded in `folder`; the defaults where none is (a
        run or an export from before the record)."""
        return cls(**read_json(f"{folder}/{DATA_SOURCE_FILE}", default={}))
