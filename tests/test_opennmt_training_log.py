"""benchmarks.opennmt_training_log: `onmt_train`'s log, read back."""

from benchmarks import opennmt_training_log

LOG = """\
[2026-12-01 10:00:00,000 INFO] Start training loop and validate every 200 steps...
[2026-12-01 10:00:10,000 INFO] Step 100/ 1000; acc: 1.0; sents:    1600; bsz: 1/1/16;
[2026-12-01 10:00:20,000 INFO] Step 200/ 1000; acc: 2.0; sents:    1600; bsz: 1/1/16;
[2026-12-01 10:00:25,000 INFO] Validation perplexity: 90.5
[2026-12-01 10:00:25,000 INFO] Validation accuracy: 20.25
[2026-12-01 10:00:26,000 INFO] Saving checkpoint /r/model_step_200.pt
[2026-12-01 10:00:40,000 INFO] Step 300/ 1000; acc: 3.0; sents:    1600; bsz: 1/1/16;
[2026-12-01 10:01:00,000 INFO] Start training loop and validate every 200 steps...
[2026-12-01 10:01:00,000 INFO] Loading checkpoint from /r/model_step_200.pt
[2026-12-01 10:01:10,000 INFO] Step 300/ 1000; acc: 3.0; sents:    1600; bsz: 1/1/16;
[2026-12-01 10:01:30,000 INFO] Step 400/ 1000; acc: 4.0; sents:    1600; bsz: 1/1/16;
[2026-12-01 10:01:32,000 INFO] Validation perplexity: 80.0
[2026-12-01 10:01:32,000 INFO] Validation accuracy: 25.5
[2026-12-01 10:01:33,000 INFO] Saving checkpoint /r/model_step_400.pt
"""


def test_parse_training_log_counts_time_kept_across_a_resume():
    log = opennmt_training_log.parse_training_log(LOG)
    # The first run's time up to its checkpoint (26 s) counts; its 14 s of
    # lost steps after it do not. The second run reaches its validation 32 s in.
    assert log.validations == [(200, 90.5, 20.25, 25.0), (400, 80.0, 25.5, 58.0)]
    assert log.best() == (400, 80.0, 25.5, 58.0)
    # Timed windows: 10 s (step 200), 20 s (step 400); those after a
    # validation or a run's start are left out.
    assert (log.examples, log.seconds) == (3200, 30.0)
    assert not log.stopped


def test_training_finished_by_patience_or_early_stop():
    config = {"early_stopping": 2, "valid_steps": 200, "train_steps": 100000}
    log = opennmt_training_log.parse_training_log(LOG)
    assert not opennmt_training_log.training_finished(log, config)
    log.validations += [(600, 81.0, 25.0, 90.0), (800, 82.0, 25.0, 120.0)]
    assert opennmt_training_log.training_finished(log, config)
    stopped = opennmt_training_log.parse_training_log(
        LOG + "[2026-12-01 10:02:00,000 INFO] Training finished. Early Stop!\n"
    )
    assert opennmt_training_log.training_finished(stopped, config)
