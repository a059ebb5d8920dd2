2026-12-04, AMD EPYC 2 cores, TensorFlow, beside a training run. The runs (test scores and training in their records):
  runs/cho_1000steps       memnmt train multi30k_cho --data-dir $MEMNMT_DATA --out runs/cho_1000steps --set max_steps=1000 (records/cho_1000steps)
  runs/sbs_rnn             memnmt train multi30k_rnnsearch --data-dir $MEMNMT_DATA --out runs/sbs_rnn --set max_steps=1000 (records/rnnsearch_1000steps: the same command, the same test translations)
  runs/memdec_1000steps    memnmt train multi30k_memdec_scratch --data-dir $MEMNMT_DATA --out runs/memdec_1000steps --set max_steps=1000 (records/memdec_1000steps)
  runs/sbs_transformer     memnmt train multi30k_transformer --data-dir $MEMNMT_DATA --out runs/sbs_transformer --set epochs=2 --set warmup_steps=300 (records/transformer_922steps)
python benchmarks/joined_lengths.py --data-dir $MEMNMT_DATA --run runs/cho_1000steps --run runs/sbs_rnn --run runs/memdec_1000steps --run runs/sbs_transformer --joins 1,2,3,4 --out DIR --plot joined.png
The translations here are DIR's {run}.join{K}.de; --reuse on a DIR holding them scores them again without translating.
