"""Sequence models of the papers' benchmarks. Every forward(inputs..., y) returns the scalar cross-entropy loss.

Sizes not fixed by the papers' text are assumptions, stated here and in models/zoo/README.md:
  - RNN-L-H (Tofu §7): L stacked LSTM layers of hidden size H, 20 unrolled steps, embedding size H, softmax over a
    10,000-word vocabulary (Penn Treebank's), next-token loss at every step.
  - RNNTC / RNNLM / NMT (FlexFlow Table 3): text classification with 4 LSTM layers (hidden 1024, 40 steps, 20,000-word
    vocabulary, 2 classes from the last step); a 2-layer LSTM language model (hidden 2048, 20 steps, 10,000 words);
    a 2+2-layer LSTM encoder/decoder with dot-product attention (hidden 1024, 20 steps each side, 32,000 words).
  - Transformer (TensorOpt Table 1): a BERT-style encoder; the exact size could not be looked up here, so BERT-Large
    is assumed: 24 layers, model width 1024, 16 heads, feed-forward 4096, GELU, sequence 512, vocabulary 30,522,
    masked-LM-style loss over every position.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LstmLM(nn.Module):
    """Embedding -> L-layer LSTM -> vocabulary logits at every step; inputs x, y: int64 [N, T]."""

    def __init__(self, layers, hidden, vocab):
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x, y):
        h, _ = self.lstm(self.embed(x))
        return F.cross_entropy(self.out(h).reshape(-1, self.vocab), y.reshape(-1))


class LstmClassifier(nn.Module):
    """RNNTC: the last step's hidden state classifies the sequence; x int64 [N, T], y int64 [N]."""

    def __init__(self, layers, hidden, vocab, classes):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x, y):
        h, _ = self.lstm(self.embed(x))
        return F.cross_entropy(self.out(h[:, -1]), y)


class Seq2Seq(nn.Module):
    """NMT: LSTM encoder, LSTM decoder started from the encoder's final state, dot-product attention over the encoder
    outputs (Luong), tanh(W[dec; ctx]) -> vocabulary. src, tgt, y: int64 [N, T]."""

    def __init__(self, layers, hidden, vocab):
        super().__init__()
        self.vocab = vocab
        self.src_embed = nn.Embedding(vocab, hidden)
        self.tgt_embed = nn.Embedding(vocab, hidden)
        self.encoder = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.decoder = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.combine = nn.Linear(2 * hidden, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src, tgt, y):
        enc, state = self.encoder(self.src_embed(src))
        dec, _ = self.decoder(self.tgt_embed(tgt), state)
        attn = torch.softmax(torch.bmm(dec, enc.transpose(1, 2)), dim=-1)
        ctx = torch.bmm(attn, enc)
        h = torch.tanh(self.combine(torch.cat([dec, ctx], dim=-1)))
        return F.cross_entropy(self.out(h).reshape(-1, self.vocab), y.reshape(-1))


class Decoder(nn.Module):
    """GPT-2-style: token embedding + learned positions, L pre-norm causal self-attention layers (GELU), a final
    LayerNorm and an untied vocabulary head without bias; y is x shifted by one token. x, y: int64 [N, S].
    The causal mask is built in forward (Trilu of a constant, folded at import), not registered as a buffer: a float
    initializer would be trained as a parameter."""

    def __init__(self, layers, width, heads, ff, seq, vocab, dropout=0.0):
        super().__init__()
        self.vocab, self.seq = vocab, seq
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(seq, width))
        layer = nn.TransformerEncoderLayer(width, heads, ff, dropout, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, vocab, bias=False)

    def forward(self, x, y):
        causal = torch.full((self.seq, self.seq), float("-inf")).triu(1)
        h = self.layers(self.embed(x) + self.pos, mask=causal)
        return F.cross_entropy(self.out(self.norm(h)).reshape(-1, self.vocab), y.reshape(-1))


class Encoder(nn.Module):
    """BERT-style: token embedding + learned positions, LayerNorm, L post-norm encoder layers (GELU), vocabulary
    logits at every position. x, y: int64 [N, S]."""

    def __init__(self, layers, width, heads, ff, seq, vocab, dropout=0.1):
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(seq, width))
        self.norm = nn.LayerNorm(width)
        layer = nn.TransformerEncoderLayer(width, heads, ff, dropout, activation="gelu", batch_first=True)
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(width, vocab)

    def forward(self, x, y):
        h = self.norm(self.embed(x) + self.pos)
        h = self.layers(h)
        return F.cross_entropy(self.out(h).reshape(-1, self.vocab), y.reshape(-1))
